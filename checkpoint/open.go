package checkpoint

// Opening the store: the load of every record at start, the removal of
// leftover temporary files, the migration of old format versions, and the
// quarantine of what cannot be loaded (the revision counter included).

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Open opens (creating if needed) the store under root, bootlet's
// --root-dir. It loads every record, removes leftover temporary files,
// migrates old format versions and quarantines damaged files. It returns an
// error only when the store cannot be made consistent (for example a
// directory cannot be created, or a damaged file cannot be moved aside).
func Open(root string) (*Store, error) { return openFS(root, osFS{}) }

func openFS(root string, fs fsys) (*Store, error) {
	if root == "" {
		return nil, errors.New("checkpoint: empty root directory")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: root %s: %w", root, err)
	}
	syncs := &syncWatch{}
	s := &Store{
		fs:          watchSyncs(fs, syncs),
		syncs:       syncs,
		dir:         filepath.Join(abs, "checkpoint"),
		qdir:        filepath.Join(abs, "quarantine"),
		records:     make(map[Kind]map[string]Record, len(kinds)),
		durableDirs: make(map[string]bool),
	}
	dirs := []string{s.dir, s.qdir}
	for _, k := range kinds {
		dirs = append(dirs, s.kindDir(k))
		s.records[k] = make(map[string]Record)
	}
	for _, d := range dirs {
		if err := mkdirDurable(fs, d); err != nil {
			return nil, err
		}
		// The store and the quarantine hold Secret data: keep them private
		// even if an older or hand-made directory was more permissive.
		if err := ensurePerm(d); err != nil {
			return nil, err
		}
	}
	// The entries may predate a failed fsync; make them durable now.
	for _, d := range []string{abs, s.dir} {
		if err := fs.SyncDir(d); err != nil {
			return nil, fmt.Errorf("checkpoint: fsync directory %s: %w", d, err)
		}
	}

	if err := s.removeTemps(s.dir); err != nil {
		return nil, err
	}
	counter, err := s.readRevisionFile()
	if err != nil {
		return nil, err
	}
	s.persistedRev = counter
	s.rev = counter

	var legacy []envelope
	for _, k := range kinds {
		l, err := s.loadKind(k)
		if err != nil {
			return nil, err
		}
		legacy = append(legacy, l...)
	}

	// Legacy files get fresh revisions, in a deterministic order, and are
	// rewritten as current-version envelopes before Open returns.
	slices.SortFunc(legacy, func(a, b envelope) int {
		return compareKeys(key{a.Kind, a.Namespace, a.Name}, key{b.Kind, b.Namespace, b.Name})
	})
	for _, env := range legacy {
		r := Record{Kind: env.Kind, Namespace: env.Namespace, Name: env.Name, Data: []byte(env.Object), Revision: s.rev + 1}
		dir := s.nsDir(r.Kind, r.Namespace)
		if _, err := writeAtomic(fs, dir, r.Name+jsonExt, encodeRecord(r)); err != nil {
			return nil, fmt.Errorf("checkpoint: migrating legacy record: %w", err)
		}
		s.rev = r.Revision
		s.records[r.Kind][mapKey(r.Namespace, r.Name)] = r
	}

	if s.rev > s.persistedRev {
		// Best effort: the records on disk still bound the counter, and
		// Delete persists it before removing a record it does not cover
		// yet. Failing here would keep the daemon from starting, and from
		// serving what is stored, on a full or read-only disk.
		_ = s.writeRevisionFile(s.rev)
	}
	return s, nil
}

func ensurePerm(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: stat %s: %w", dir, err)
	}
	if fi.Mode().Perm() != dirPerm {
		if err := os.Chmod(dir, dirPerm); err != nil {
			return fmt.Errorf("checkpoint: chmod %s: %w", dir, err)
		}
	}
	return nil
}

// removeTemps deletes leftover temporary files in dir: they belong to
// writes that were never acknowledged.
func (s *Store) removeTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: read directory %s: %w", dir, err)
	}
	removed := false
	for _, e := range entries {
		if e.Type().IsRegular() && isTemp(e.Name()) {
			p := filepath.Join(dir, e.Name())
			if err := s.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("checkpoint: remove leftover temp file %s: %w", p, err)
			}
			removed = true
		}
	}
	if removed {
		if err := s.fs.SyncDir(dir); err != nil {
			return fmt.Errorf("checkpoint: fsync directory %s: %w", dir, err)
		}
	}
	return nil
}

// loadKind loads every record of kind k into s.records and returns the
// records that still need migrating to the current format version.
func (s *Store) loadKind(k Kind) ([]envelope, error) {
	kd := s.kindDir(k)
	nss, err := os.ReadDir(kd)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read directory %s: %w", kd, err)
	}
	var legacy []envelope
	for _, nsEnt := range nss {
		ns := nsEnt.Name()
		if !nsEnt.IsDir() || validPart(ns) != nil {
			continue // not ours; leave it alone
		}
		nd := s.nsDir(k, ns)
		if err := s.removeTemps(nd); err != nil {
			return nil, err
		}
		files, err := os.ReadDir(nd)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: read directory %s: %w", nd, err)
		}
		for _, f := range files {
			fn := f.Name()
			name, ok := strings.CutSuffix(fn, jsonExt)
			if f.IsDir() || !ok || validPart(name) != nil {
				continue
			}
			id := key{k, ns, name}
			p := filepath.Join(nd, fn)
			env, migrated, err := loadFile(p, id)
			if err != nil {
				s.rev = max(s.rev, env.Revision) // readable revision of a damaged file still counts
				if qerr := s.quarantine(p, id, err.Error()); qerr != nil {
					return nil, qerr
				}
				continue
			}
			if migrated {
				legacy = append(legacy, env)
				continue
			}
			s.rev = max(s.rev, env.Revision)
			s.records[k][mapKey(ns, name)] = Record{Kind: k, Namespace: ns, Name: name, Data: []byte(env.Object), Revision: env.Revision}
		}
	}
	return legacy, nil
}

// loadFile reads and verifies one record file. migrated reports that the
// file was in an older format and must be rewritten. On error the returned
// envelope may still carry the file's revision.
func loadFile(path string, id key) (env envelope, migrated bool, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return envelope{}, false, fmt.Errorf("read error: %w", err)
	}
	version, err := formatVersionOf(raw)
	if err != nil {
		return envelope{Revision: salvageRevision(raw)}, false, err
	}
	env, err = migrate(version, raw, id)
	if err != nil {
		return envelope{Revision: salvageRevision(raw)}, false, err
	}
	if env.FormatVersion != currentFormatVersion {
		return env, false, fmt.Errorf("migration from formatVersion %d produced formatVersion %d", version, env.FormatVersion)
	}
	if env.Kind != id.kind || env.Namespace != id.namespace || env.Name != id.name {
		return env, false, fmt.Errorf("envelope identity %s/%s/%s does not match its path", env.Kind, env.Namespace, env.Name)
	}
	if err := validObject(env.Object); err != nil {
		return env, false, fmt.Errorf("object: %w", err)
	}
	if got := checksum(env.Object); got != env.SHA256 {
		return env, false, fmt.Errorf("sha256 mismatch: envelope says %q, object hashes to %q", env.SHA256, got)
	}
	return env, version != currentFormatVersion, nil
}

var revisionRE = regexp.MustCompile(`"revision"\s*:\s*([0-9]{1,20})\b`)

// salvageRevision recovers the revision from a damaged envelope. The
// envelope header precedes the object, so a truncated file usually still
// holds it; counting it keeps the counter from going backwards when the
// damaged file carried the highest revision.
func salvageRevision(raw []byte) uint64 {
	if !bytes.Contains(raw, []byte(`"formatVersion"`)) {
		return 0
	}
	m := revisionRE.FindSubmatch(raw)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseUint(string(m[1]), 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// quarantine moves a damaged file into the quarantine directory. It never
// deletes anything.
func (s *Store) quarantine(src string, id key, reason string) error {
	dst, err := s.freeQuarantineName(id, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("checkpoint: quarantine %s (%s): %w", src, reason, err)
	}
	if err := s.fs.Rename(src, dst); err != nil {
		return fmt.Errorf("checkpoint: quarantine %s (%s): %w", src, reason, err)
	}
	if err := s.fs.SyncDir(s.qdir); err != nil {
		return fmt.Errorf("checkpoint: fsync directory %s: %w", s.qdir, err)
	}
	if err := s.fs.SyncDir(filepath.Dir(src)); err != nil {
		return fmt.Errorf("checkpoint: fsync directory %s: %w", filepath.Dir(src), err)
	}
	s.mu.Lock()
	s.quarantined = append(s.quarantined, Quarantined{Path: dst, Reason: fmt.Sprintf("%s: %s", src, reason)})
	s.mu.Unlock()
	return nil
}

// maxQuarantineTries bounds the search for a free quarantine file name, so
// a directory that answers every Lstat with "exists" (or a clock that does
// not move) ends in an error instead of a spin.
const maxQuarantineTries = 1000

// freeQuarantineName returns a quarantine path for id that does not exist
// yet, trying the stamps now, now+1, ... An Lstat failure other than
// ENOENT (EACCES, EIO, ENOTDIR) is returned: retrying cannot fix it.
func (s *Store) freeQuarantineName(id key, now int64) (string, error) {
	for i := int64(0); i < maxQuarantineTries; i++ {
		dst := filepath.Join(s.qdir, fmt.Sprintf("%s_%s_%s_%d%s", id.kind, id.namespace, id.name, now+i, jsonExt))
		_, err := s.fs.Lstat(dst)
		if errors.Is(err, os.ErrNotExist) {
			return dst, nil
		}
		if err != nil {
			return "", fmt.Errorf("lstat %s: %w", dst, err)
		}
	}
	return "", fmt.Errorf("no free name in %s after %d tries", s.qdir, maxQuarantineTries)
}

func (s *Store) readRevisionFile() (uint64, error) {
	p := filepath.Join(s.dir, revFile)
	raw, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("checkpoint: read %s: %w", p, err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		// Move it aside; the records still give a lower bound and Open
		// rewrites the file from them.
		if qerr := s.quarantine(p, key{"checkpoint", "", revFile}, fmt.Sprintf("unparsable revision counter: %v", err)); qerr != nil {
			return 0, qerr
		}
		return 0, nil
	}
	return v, nil
}

func (s *Store) writeRevisionFile(v uint64) error {
	if _, err := writeAtomic(s.fs, s.dir, revFile, []byte(strconv.FormatUint(v, 10)+"\n")); err != nil {
		return err
	}
	s.mu.Lock()
	s.persistedRev = v
	s.mu.Unlock()
	return nil
}
