package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind names a record type; its value is also the directory name.
type Kind string

// The kinds the store holds.
const (
	KindPod       Kind = "pods"
	KindSecret    Kind = "secrets"
	KindConfigMap Kind = "configmaps"
	// KindPodCheckpoint holds the checkpointer's records (shim.Checkpoint):
	// one per self-hosted component, its pod and the Secrets and ConfigMaps
	// it uses in one record, so a checkpoint is replaced atomically. The
	// API's registry does not load them: they are not bootlet's pods until
	// the checkpointer activates one.
	KindPodCheckpoint Kind = "podcheckpoints"
)

var kinds = []Kind{KindPod, KindSecret, KindConfigMap, KindPodCheckpoint}

func (k Kind) valid() bool { return slices.Contains(kinds, k) }

// Record is one stored object.
type Record struct {
	Kind      Kind
	Namespace string
	Name      string
	// Data is the object JSON exactly as Put received it, except that
	// insignificant leading and trailing whitespace is dropped.
	Data []byte
	// Revision is the store-wide monotonic counter value assigned at Put.
	Revision uint64
}

func (r Record) clone() Record {
	r.Data = bytes.Clone(r.Data)
	return r
}

// Quarantined describes a file Open moved aside.
type Quarantined struct {
	Path   string // where the file now lives, under ROOT/quarantine
	Reason string // why it was moved, including its original path
}

type key struct {
	kind      Kind
	namespace string
	name      string
}

// Store is the durable checkpoint store. It is safe for concurrent use;
// writes are serialised.
//
// Two locks keep a slow disk away from readers: wmu serialises the writers
// and is held across their file I/O and fsyncs; mu guards the in-memory
// view (records, counters, the quarantine list) and is held only to read
// it or to swap in a write's result once it is durable. Readers take mu
// alone, so a hung fsync never blocks Get, List or Revision. Fields that
// only writers read may be read under wmu alone; every change to them
// happens under wmu and mu.
type Store struct {
	wmu     sync.Mutex
	mu      sync.RWMutex
	fs      fsys
	syncs   *syncWatch
	dir     string // ROOT/checkpoint
	qdir    string // ROOT/quarantine
	records map[Kind]map[string]Record
	rev     uint64 // highest revision assigned
	// persistedRev is the value known to be durable in the revision file.
	persistedRev uint64
	quarantined  []Quarantined
	// durableDirs holds namespace directories whose entries this process
	// has fsynced into their parent.
	durableDirs map[string]bool
}

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

// validPart checks a namespace or name for use as a path component.
// Kubernetes names are DNS-1123, so this only guards against what would
// escape or confuse the layout.
func validPart(s string) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case strings.Contains(s, "/"):
		return fmt.Errorf("%q must not contain '/'", s)
	case strings.Contains(s, ".."):
		return fmt.Errorf("%q must not contain '..'", s)
	case strings.HasPrefix(s, "."):
		return fmt.Errorf("%q must not start with '.'", s)
	case strings.ContainsAny(s, "\x00\\"):
		return fmt.Errorf("%q must not contain NUL or '\\'", s)
	case len(s) > maxPart:
		return fmt.Errorf("%q is longer than %d bytes", s, maxPart)
	}
	return nil
}

func validate(kind Kind, namespace, name string) error {
	if !kind.valid() {
		return fmt.Errorf("checkpoint: unknown kind %q", kind)
	}
	if err := validPart(namespace); err != nil {
		return fmt.Errorf("checkpoint: invalid namespace: %w", err)
	}
	if err := validPart(name); err != nil {
		return fmt.Errorf("checkpoint: invalid name: %w", err)
	}
	return nil
}

func mapKey(namespace, name string) string { return namespace + "/" + name }

func compareKeys(a, b key) int {
	if c := strings.Compare(string(a.kind), string(b.kind)); c != 0 {
		return c
	}
	if c := strings.Compare(a.namespace, b.namespace); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

func (s *Store) kindDir(k Kind) string          { return filepath.Join(s.dir, string(k)) }
func (s *Store) nsDir(k Kind, ns string) string { return filepath.Join(s.dir, string(k), ns) }

// Put durably stores data as the object kind/namespace/name, assigning it
// the next revision. data must be a JSON object. It returns only after the
// record is durable; on error nothing visible changes and the previous
// record, if any, is still served.
func (s *Store) Put(kind Kind, namespace, name string, data []byte) (Record, error) {
	if err := validate(kind, namespace, name); err != nil {
		return Record{}, err
	}
	obj := bytes.TrimSpace(data)
	if err := validObject(obj); err != nil {
		return Record{}, fmt.Errorf("checkpoint: %s %s/%s: %w", kind, namespace, name, err)
	}

	s.wmu.Lock()
	defer s.wmu.Unlock()

	if s.rev == math.MaxUint64 {
		return Record{}, errors.New("checkpoint: revision counter exhausted")
	}
	r := Record{Kind: kind, Namespace: namespace, Name: name, Data: bytes.Clone(obj), Revision: s.rev + 1}
	dir := s.nsDir(kind, namespace)
	if err := s.ensureNSDir(kind, dir); err != nil {
		return Record{}, err
	}
	renamed, err := writeAtomic(s.fs, dir, name+jsonExt, encodeRecord(r))
	if err != nil {
		if renamed {
			// The new file may be on disk: never hand its revision out
			// again, and try to put the previous state back.
			s.mu.Lock()
			s.rev = r.Revision
			s.mu.Unlock()
			if rerr := s.restore(key{kind, namespace, name}); rerr != nil {
				err = errors.Join(err, fmt.Errorf("checkpoint: rollback failed: %w", rerr))
			}
		}
		return Record{}, err
	}
	// Durable: only now do readers see it.
	s.mu.Lock()
	s.rev = r.Revision
	s.records[kind][mapKey(namespace, name)] = r
	s.mu.Unlock()
	return r.clone(), nil
}

// ensureNSDir makes sure a namespace directory exists and its entry is
// durable in the kind directory. The parent is fsynced the first time this
// process writes to the directory, even if it already existed: an earlier
// attempt may have created it and then failed to fsync. Caller holds wmu.
func (s *Store) ensureNSDir(kind Kind, dir string) error {
	if s.durableDirs[dir] {
		return nil
	}
	if err := mkdirDurable(s.fs, dir); err != nil {
		return err
	}
	if err := s.fs.SyncDir(s.kindDir(kind)); err != nil {
		return fmt.Errorf("checkpoint: fsync directory %s: %w", s.kindDir(kind), err)
	}
	s.durableDirs[dir] = true
	return nil
}

// restore makes the file for id match the in-memory view again after a
// failed write or delete: best effort, its error is only reported. Caller
// holds wmu.
func (s *Store) restore(id key) error {
	dir := s.nsDir(id.kind, id.namespace)
	old, ok := s.records[id.kind][mapKey(id.namespace, id.name)]
	if !ok {
		p := filepath.Join(dir, id.name+jsonExt)
		if err := s.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
		return s.fs.SyncDir(dir)
	}
	_, err := writeAtomic(s.fs, dir, id.name+jsonExt, encodeRecord(old))
	return err
}

// Get returns the stored record, if any.
func (s *Store) Get(kind Kind, namespace, name string) (Record, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.records[kind][mapKey(namespace, name)]
	if !ok {
		return Record{}, false
	}
	return r.clone(), true
}

// Delete durably removes the record. Deleting a missing record is not an
// error. On error the record is still served.
func (s *Store) Delete(kind Kind, namespace, name string) error {
	if err := validate(kind, namespace, name); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()

	mk := mapKey(namespace, name)
	old, ok := s.records[kind][mk]
	if !ok {
		return nil
	}
	if err := s.coverRevision(old); err != nil {
		return err
	}
	dir := s.nsDir(kind, namespace)
	p := filepath.Join(dir, name+jsonExt)
	if err := s.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checkpoint: remove %s: %w", p, err)
	}
	if err := s.fs.SyncDir(dir); err != nil {
		err = fmt.Errorf("checkpoint: fsync directory %s (removing %s): %w", dir, p, err)
		if rerr := s.restore(key{kind, namespace, name}); rerr != nil {
			err = errors.Join(err, fmt.Errorf("checkpoint: rollback failed: %w", rerr))
		}
		return err
	}
	s.mu.Lock()
	delete(s.records[kind], mk)
	s.mu.Unlock()
	return nil
}

// coverRevision makes the counter file cover r's revision before r's file
// leaves the store (deleted or quarantined): once the file is gone its
// revision no longer bounds the counter on disk. Caller holds s.wmu.
func (s *Store) coverRevision(r Record) error {
	if r.Revision <= s.persistedRev {
		return nil
	}
	return s.writeRevisionFile(s.rev)
}

// Quarantine moves a stored record aside after the caller found it
// unusable although it passed the store's checks (its object does not
// decode as the kind it is stored as). The record stops being served, its
// file goes to the quarantine directory like the files Open moves, and
// Quarantined reports it. Its revision keeps bounding the counter.
// Quarantining a missing record is not an error.
func (s *Store) Quarantine(kind Kind, namespace, name, reason string) error {
	if err := validate(kind, namespace, name); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	mk := mapKey(namespace, name)
	old, ok := s.records[kind][mk]
	if !ok {
		return nil
	}
	if err := s.coverRevision(old); err != nil {
		return err
	}
	p := filepath.Join(s.nsDir(kind, namespace), name+jsonExt)
	if err := s.quarantine(p, key{kind, namespace, name}, reason); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.records[kind], mk)
	s.mu.Unlock()
	return nil
}

// List returns every record of kind, sorted by namespace then name.
func (s *Store) List(kind Kind) []Record {
	s.mu.RLock()
	out := make([]Record, 0, len(s.records[kind]))
	for _, r := range s.records[kind] {
		out = append(out, r.clone())
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b Record) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Quarantined returns the files Open moved aside.
func (s *Store) Quarantined() []Quarantined {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.quarantined)
}

// Revision returns the highest revision assigned so far. It is persisted:
// it survives restarts and never goes backwards.
func (s *Store) Revision() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rev
}

// Reserve makes the durable revision counter at least v, so a caller that
// numbers changes the store never sees (bootlet's status-only
// resourceVersions) can reserve a block of numbers ahead and never hand one
// out twice across restarts: after Reserve returns, Revision and every
// later Open report at least v.
func (s *Store) Reserve(v uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if v <= s.persistedRev {
		return nil
	}
	if v < s.rev {
		v = s.rev
	}
	if err := s.writeRevisionFile(v); err != nil {
		return err
	}
	s.mu.Lock()
	s.rev = v
	s.mu.Unlock()
	return nil
}

// FsyncPending reports how long the oldest fsync the store is waiting for
// has been pending (0: none). The daemon's /readyz fails when it is too
// long: a hung disk holds every write, though reads go on.
func (s *Store) FsyncPending() time.Duration { return s.syncs.pending(time.Now()) }

// SetFsyncHook makes every fsync of the store call hook(path) first, while
// it counts as pending (nil: none). Tests use it to stand in for a slow or
// hung disk.
func (s *Store) SetFsyncHook(hook func(path string)) { s.syncs.setHook(hook) }

// Dir returns the store directory, ROOT/checkpoint.
func (s *Store) Dir() string { return s.dir }
