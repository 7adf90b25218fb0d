package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
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
	// KindPodCheckpoint holds the checkpointer's records (checkpointer.Checkpoint):
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
