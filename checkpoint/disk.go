package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// currentFormatVersion is the envelope version Put writes.
const currentFormatVersion = 1

const (
	dirPerm  os.FileMode = 0o700
	tmpMark              = ".tmp-"
	jsonExt              = ".json"
	maxPart              = 250 // name + ".json" must fit in a 255-byte file name
	revFile              = "revision"
	tmpShort             = ".tmp-*" // pattern for names too long to embed in the temp name
)

// fsys is the set of mutating file-system operations the store performs,
// plus the Lstat that picks a free quarantine name. It exists so tests can
// inject failures (a full or read-only disk, an unreadable directory) at
// each step; production uses osFS.
type fsys interface {
	Lstat(path string) (os.FileInfo, error)
	Mkdir(path string, perm os.FileMode) error
	CreateTemp(dir, pattern string) (tempFile, error)
	Rename(oldpath, newpath string) error
	Remove(path string) error
	SyncDir(path string) error
}

type tempFile interface {
	io.Writer
	Name() string
	Sync() error
	Close() error
}

type osFS struct{}

func (osFS) Lstat(path string) (os.FileInfo, error)    { return os.Lstat(path) }
func (osFS) Mkdir(path string, perm os.FileMode) error { return os.Mkdir(path, perm) }

func (osFS) CreateTemp(dir, pattern string) (tempFile, error) {
	f, err := os.CreateTemp(dir, pattern) // mode 0600
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (osFS) Remove(path string) error             { return os.Remove(path) }

func (osFS) SyncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// tmpPattern returns the os.CreateTemp pattern for a temporary file that
// will be renamed to base.
func tmpPattern(base string) string {
	if len(base) > 200 {
		return tmpShort
	}
	return "." + base + tmpMark + "*"
}

// isTemp reports whether a directory entry name is one of our temp files.
func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tmpMark)
}

// writeAtomic durably replaces dir/base with data: temp file, fsync, rename,
// fsync dir. renamed reports whether the rename happened, i.e. whether the
// new content may be visible at dir/base even though err != nil.
func writeAtomic(fs fsys, dir, base string, data []byte) (renamed bool, err error) {
	final := filepath.Join(dir, base)
	f, err := fs.CreateTemp(dir, tmpPattern(base))
	if err != nil {
		return false, fmt.Errorf("checkpoint: create temp file for %s: %w", final, err)
	}
	tmp := f.Name()
	fail := func(step string, err error) (bool, error) {
		_ = f.Close()
		_ = fs.Remove(tmp)
		return false, fmt.Errorf("checkpoint: %s %s (writing %s): %w", step, tmp, final, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail("write", err)
	}
	if err := f.Sync(); err != nil {
		return fail("fsync", err)
	}
	if err := f.Close(); err != nil {
		_ = fs.Remove(tmp)
		return false, fmt.Errorf("checkpoint: close %s (writing %s): %w", tmp, final, err)
	}
	if err := fs.Rename(tmp, final); err != nil {
		_ = fs.Remove(tmp)
		return false, fmt.Errorf("checkpoint: rename %s to %s: %w", tmp, final, err)
	}
	if err := fs.SyncDir(dir); err != nil {
		return true, fmt.Errorf("checkpoint: fsync directory %s (writing %s): %w", dir, final, err)
	}
	return true, nil
}

// WriteFileAtomic durably replaces path with data for a reader that must
// never see half a file (the kubelet's static pod directory): a dotfile
// temp (mode 0600) in the same directory, fsync, rename, fsync of the
// directory. It makes the directory if missing. renamed reports whether the
// new content is in place, which it may be even when err != nil (a failed
// directory fsync).
func WriteFileAtomic(path string, data []byte) (renamed bool, err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	return writeAtomic(osFS{}, dir, filepath.Base(path), data)
}

// mkdirDurable creates path and any missing parents with mode 0700, fsyncing
// the parent of every directory it creates.
func mkdirDurable(fs fsys, path string) error {
	fi, err := os.Stat(path)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("checkpoint: %s exists and is not a directory", path)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checkpoint: stat %s: %w", path, err)
	}
	parent := filepath.Dir(path)
	if parent != path {
		if err := mkdirDurable(fs, parent); err != nil {
			return err
		}
	}
	if err := fs.Mkdir(path, dirPerm); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("checkpoint: mkdir %s: %w", path, err)
	}
	if err := fs.SyncDir(parent); err != nil {
		return fmt.Errorf("checkpoint: fsync directory %s (after creating %s): %w", parent, path, err)
	}
	return nil
}

// envelope is the on-disk form of a record.
type envelope struct {
	FormatVersion int             `json:"formatVersion"`
	Kind          Kind            `json:"kind"`
	Namespace     string          `json:"namespace"`
	Name          string          `json:"name"`
	Revision      uint64          `json:"revision"`
	SHA256        string          `json:"sha256"`
	Object        json.RawMessage `json:"object"`
}

func checksum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// encodeRecord renders the current-version envelope for r. The object bytes
// are spliced in verbatim (encoding/json would re-indent a RawMessage, which
// would change the bytes the checksum covers and the bytes Get returns).
func encodeRecord(r Record) []byte {
	q := func(s string) []byte {
		b, _ := json.Marshal(s) // marshalling a string cannot fail
		return b
	}
	var b bytes.Buffer
	b.Grow(len(r.Data) + 256)
	b.WriteString("{\n  \"formatVersion\": ")
	b.WriteString(strconv.Itoa(currentFormatVersion))
	b.WriteString(",\n  \"kind\": ")
	b.Write(q(string(r.Kind)))
	b.WriteString(",\n  \"namespace\": ")
	b.Write(q(r.Namespace))
	b.WriteString(",\n  \"name\": ")
	b.Write(q(r.Name))
	b.WriteString(",\n  \"revision\": ")
	b.WriteString(strconv.FormatUint(r.Revision, 10))
	b.WriteString(",\n  \"sha256\": \"")
	b.WriteString(checksum(r.Data))
	b.WriteString("\",\n  \"object\": ")
	b.Write(r.Data)
	b.WriteString("\n}\n")
	return b.Bytes()
}

// formatVersionOf reads just the formatVersion of a file; 0 when absent.
func formatVersionOf(raw []byte) (int, error) {
	var probe struct {
		FormatVersion *int `json:"formatVersion"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return 0, fmt.Errorf("unparsable JSON: %w", err)
	}
	if probe.FormatVersion == nil {
		return 0, nil
	}
	return *probe.FormatVersion, nil
}

// migrate converts the raw content of a record file written with format
// version to a current-version envelope. k is the identity derived from the
// file's path, used by formats that did not record it. A migrated envelope
// from an older version has Revision 0; the caller assigns one and rewrites
// the file.
//
// Version history:
//
//	0: the bare object JSON (no envelope, no checksum, no revision).
//	1: the envelope described in the package documentation.
func migrate(version int, raw []byte, k key) (envelope, error) {
	switch version {
	case 0:
		obj := bytes.TrimSpace(raw)
		if err := validObject(obj); err != nil {
			return envelope{}, fmt.Errorf("legacy v0 file: %w", err)
		}
		return envelope{
			FormatVersion: currentFormatVersion,
			Kind:          k.kind,
			Namespace:     k.namespace,
			Name:          k.name,
			SHA256:        checksum(obj),
			Object:        json.RawMessage(obj),
		}, nil
	case 1:
		var env envelope
		if err := json.Unmarshal(raw, &env); err != nil {
			return envelope{}, fmt.Errorf("unparsable envelope: %w", err)
		}
		return env, nil
	default:
		return envelope{}, fmt.Errorf("unsupported formatVersion %d (this bootlet supports up to %d)", version, currentFormatVersion)
	}
}

// validObject reports whether b is a single JSON object.
func validObject(b []byte) error {
	if len(b) == 0 {
		return errors.New("empty object")
	}
	if b[0] != '{' || !json.Valid(b) {
		return errors.New("not a valid JSON object")
	}
	return nil
}

// syncWatch tracks the fsyncs in flight, so a hung disk shows (FsyncPending,
// the daemon's /readyz), and holds the tests' hook that stands in for a
// slow disk.
type syncWatch struct {
	mu       sync.Mutex
	inFlight map[uint64]time.Time
	next     uint64
	hook     func(path string)
}

func (w *syncWatch) setHook(hook func(path string)) {
	w.mu.Lock()
	w.hook = hook
	w.mu.Unlock()
}

// begin marks an fsync pending and returns its end.
func (w *syncWatch) begin(path string) (end func()) {
	w.mu.Lock()
	if w.inFlight == nil {
		w.inFlight = map[uint64]time.Time{}
	}
	id := w.next
	w.next++
	w.inFlight[id] = time.Now()
	hook := w.hook
	w.mu.Unlock()
	if hook != nil {
		hook(path)
	}
	return func() {
		w.mu.Lock()
		delete(w.inFlight, id)
		w.mu.Unlock()
	}
}

// pending is the age of the oldest fsync in flight at now (0: none).
func (w *syncWatch) pending(now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var oldest time.Duration
	for _, t := range w.inFlight {
		oldest = max(oldest, now.Sub(t))
	}
	return oldest
}

// watchSyncs wraps fs so that its fsyncs (of directories and of temp files)
// are tracked by w.
func watchSyncs(fs fsys, w *syncWatch) fsys { return syncWatchedFS{fs, w} }

type syncWatchedFS struct {
	fsys
	w *syncWatch
}

func (f syncWatchedFS) SyncDir(path string) error {
	defer f.w.begin(path)()
	return f.fsys.SyncDir(path)
}

func (f syncWatchedFS) CreateTemp(dir, pattern string) (tempFile, error) {
	t, err := f.fsys.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return syncWatchedFile{t, f.w}, nil
}

type syncWatchedFile struct {
	tempFile
	w *syncWatch
}

func (f syncWatchedFile) Sync() error {
	defer f.w.begin(f.Name())()
	return f.tempFile.Sync()
}
