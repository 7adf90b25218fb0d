package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Inspect reads the store under root without changing anything on disk: no
// directory is created, nothing is migrated, removed or quarantined. It is
// for disaster recovery while the daemon is down (`bootlet checkpoint`).
// Records that Open would quarantine are returned in damaged, with the
// reason; files already in ROOT/quarantine are listed there too.
func Inspect(root string) (records []Record, damaged []Quarantined, err error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(abs, "checkpoint")
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, err
	}
	for _, k := range kinds {
		nss, err := os.ReadDir(filepath.Join(dir, string(k)))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, nsEnt := range nss {
			ns := nsEnt.Name()
			if !nsEnt.IsDir() || validPart(ns) != nil {
				continue
			}
			files, err := os.ReadDir(filepath.Join(dir, string(k), ns))
			if err != nil {
				return nil, nil, err
			}
			for _, f := range files {
				name, ok := strings.CutSuffix(f.Name(), jsonExt)
				if f.IsDir() || !ok || isTemp(f.Name()) || validPart(name) != nil {
					continue
				}
				p := filepath.Join(dir, string(k), ns, f.Name())
				env, _, err := loadFile(p, key{k, ns, name})
				if err != nil {
					damaged = append(damaged, Quarantined{Path: p, Reason: err.Error()})
					continue
				}
				records = append(records, Record{Kind: k, Namespace: ns, Name: name, Data: []byte(env.Object), Revision: env.Revision})
			}
		}
	}
	slices.SortFunc(records, func(a, b Record) int {
		return compareKeys(key{a.Kind, a.Namespace, a.Name}, key{b.Kind, b.Namespace, b.Name})
	})
	qfiles, _ := os.ReadDir(filepath.Join(abs, "quarantine"))
	for _, f := range qfiles {
		damaged = append(damaged, Quarantined{Path: filepath.Join(abs, "quarantine", f.Name()), Reason: "quarantined at an earlier start"})
	}
	return records, damaged, nil
}
