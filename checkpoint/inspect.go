package checkpoint

import (
	"errors"
	"fmt"
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

// InspectOne is Inspect's record of kind namespace/name, read the same way
// (nothing on disk changes); a damaged or missing one is an error.
func InspectOne(root string, kind Kind, namespace, name string) (Record, error) {
	recs, _, err := Inspect(root)
	if err != nil {
		return Record{}, err
	}
	for _, r := range recs {
		if r.Kind == kind && r.Namespace == namespace && r.Name == name {
			return r, nil
		}
	}
	return Record{}, fmt.Errorf("no checkpointed %s %s/%s under %s", strings.TrimSuffix(string(kind), "s"), namespace, name, root)
}

// InspectObjects is Inspect's records of API objects (pods, Secrets,
// ConfigMaps), what `bootlet apply` may take back. The checkpointer's own
// records are left out: applied, one would run a self-hosted pod under its
// own name.
func InspectObjects(root string) ([]Record, error) {
	recs, _, err := Inspect(root)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(recs, func(r Record) bool { return r.Kind == KindPodCheckpoint }), nil
}
