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

// AtomicFile is one file of WriteFilesAtomic: its path, content and mode.
type AtomicFile struct {
	Path string
	Data []byte
	Mode os.FileMode
}

// WriteFilesAtomic durably writes files that are only of use together (a
// joining node's kubelet configuration, the CA it names, and the bootstrap
// kubeconfig): nothing is renamed into place until every file is staged as
// WriteFileAtomic stages one (a dotfile temp in its final directory, with
// its Mode, fsynced), so a failure while staging (a full disk, a read-only
// directory) leaves no file and no directory it made. Then the files are
// renamed in the order given (put last the one whose presence tells a
// reader the others are there) and each directory is fsynced. A rename
// fails only if the directory changes under it; the error then names the
// files already in place.
func WriteFilesAtomic(files []AtomicFile) (err error) {
	var made []string           // directories made here, parents first
	pending := map[int]string{} // index in files: its temp, not yet renamed
	defer func() {
		if err == nil {
			return
		}
		for _, tmp := range pending {
			_ = os.Remove(tmp)
		}
		for i := len(made) - 1; i >= 0; i-- {
			_ = os.Remove(made[i]) // fails, harmlessly, unless empty
		}
	}()
	for i, f := range files {
		dir := filepath.Dir(f.Path)
		m, err := mkdirAllDurable(dir)
		made = append(made, m...)
		if err != nil {
			return err
		}
		tmp, err := stage(dir, filepath.Base(f.Path), f.Data, f.Mode)
		if err != nil {
			return err
		}
		pending[i] = tmp
	}
	var placed []string
	dirs := map[string]bool{}
	for i, f := range files {
		if err := os.Rename(pending[i], f.Path); err != nil {
			return fmt.Errorf("checkpoint: rename %s to %s: %w (already in place: %v)", pending[i], f.Path, err, placed)
		}
		delete(pending, i)
		placed = append(placed, f.Path)
		dirs[filepath.Dir(f.Path)] = true
	}
	made = nil // in use now: never removed
	for dir := range dirs {
		if err := (osFS{}).SyncDir(dir); err != nil {
			return fmt.Errorf("checkpoint: fsync directory %s (files in place: %v): %w", dir, placed, err)
		}
	}
	return nil
}

// stage writes data to a new dotfile temp for dir/base with mode perm and
// fsyncs it; the caller renames or removes it.
func stage(dir, base string, data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(dir, tmpPattern(base))
	if err != nil {
		return "", fmt.Errorf("checkpoint: create temp file for %s: %w", filepath.Join(dir, base), err)
	}
	tmp := f.Name()
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("checkpoint: writing %s (for %s): %w", tmp, filepath.Join(dir, base), err)
	}
	return tmp, nil
}

// mkdirAllDurable makes path and its missing parents (0755), fsyncing the
// parent of each, and returns those it made, parents first.
func mkdirAllDurable(path string) (made []string, err error) {
	var missing []string
	for p := path; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return nil, fmt.Errorf("checkpoint: %s exists and is not a directory", p)
			}
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("checkpoint: stat %s: %w", p, err)
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		if err := os.Mkdir(p, 0o755); err != nil {
			return made, fmt.Errorf("checkpoint: mkdir %s: %w", p, err)
		}
		made = append(made, p)
		if err := (osFS{}).SyncDir(filepath.Dir(p)); err != nil {
			return made, fmt.Errorf("checkpoint: fsync directory %s (after creating %s): %w", filepath.Dir(p), p, err)
		}
	}
	return made, nil
}
