// Package recoverlock is the lock `bootlet recover` and the daemon share,
// so that neither starts while the other runs on the same node: recover
// takes it exclusively for its whole run, the daemon shared for its whole
// life (flock(2), released by the kernel when the process ends, however
// it ends). It imports nothing but the standard library, since the lean
// daemon build links it and must not link noderecover's etcd.
package recoverlock

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Role is who takes the lock.
type Role string

const (
	// Recover takes it exclusively: nothing else may run on the node.
	Recover Role = "recover"
	// Daemon takes it shared: daemons do not exclude each other (an
	// upgrade may start one before the other has gone), only recover.
	Daemon Role = "daemon"
)

// Path is the lock of the node whose bootlet --root-dir is rootDir: the
// file ROOT.lock beside the root dir, not in it. Recover moves the root
// dir aside, and a lock inside would go with it: a daemon started then
// would lock a new file in a new root dir and run beside the recover.
func Path(rootDir string) (string, error) {
	if rootDir == "" {
		return "", errors.New("no root dir to lock")
	}
	abs, err := filepath.Abs(rootDir)
	if err != nil {
		return "", err
	}
	if abs == "/" {
		return "", errors.New("the root dir is /: there is nothing beside it to lock")
	}
	return abs + ".lock", nil
}

// Holder is who holds the lock, as it wrote itself into the file; PID 0
// when it has not written yet (or the file says something else).
type Holder struct {
	PID  int
	Role Role
}

// parseHolder reads the file's "PID ROLE" line.
func parseHolder(content string) Holder {
	fields := strings.Fields(content)
	if len(fields) != 2 {
		return Holder{}
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 0 {
		return Holder{}
	}
	r := Role(fields[1])
	if r != Recover && r != Daemon {
		return Holder{}
	}
	return Holder{PID: pid, Role: r}
}

func (h Holder) line() string { return fmt.Sprintf("%d %s\n", h.PID, h.Role) }

// HeldError is Acquire's answer when another process holds the lock.
type HeldError struct {
	Path   string
	Want   Role // who asked
	Holder Holder
}

func (e *HeldError) Error() string {
	pid := "a process that has not written its pid yet"
	if e.Holder.PID > 0 {
		pid = "pid " + strconv.Itoa(e.Holder.PID)
	}
	if e.Want == Daemon {
		return fmt.Sprintf("a bootlet recover is under way (lock %s held by %s): start the daemon once it has finished", e.Path, pid)
	}
	switch e.Holder.Role {
	case Recover:
		return fmt.Sprintf("another bootlet recover is under way (lock %s held by %s)", e.Path, pid)
	case Daemon:
		return fmt.Sprintf("a bootlet daemon runs on this root dir (lock %s held by %s): stop it first; recover runs offline", e.Path, pid)
	}
	return fmt.Sprintf("lock %s is held by %s (a bootlet daemon, or another recover): stop it first; recover runs offline", e.Path, pid)
}

// Lock is a held lock; Release (or the process's end) lets it go.
type Lock struct {
	f    *os.File
	path string
}

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// Release lets the lock go.
func (l *Lock) Release() error { return l.f.Close() }

// Acquire takes the lock of rootDir for role without waiting: a
// *HeldError, naming the holder, when another process holds it in a
// conflicting mode. The file is created when missing (its directory too,
// as the daemon creates its root dir), never through a symlink.
func Acquire(rootDir string, role Role) (*Lock, error) {
	how := syscall.LOCK_SH
	switch role {
	case Recover:
		how = syscall.LOCK_EX
	case Daemon:
	default:
		return nil, fmt.Errorf("recoverlock: unknown role %q", role)
	}
	path, err := Path(rootDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("lock %s is not a regular file", path)
	}
	for {
		err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		data, _ := io.ReadAll(io.LimitReader(f, 64))
		f.Close()
		return nil, &HeldError{Path: path, Want: role, Holder: parseHolder(string(data))}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Who holds it, for the other side's error. Daemons sharing it
	// overwrite each other: any of their pids will do.
	line := Holder{PID: os.Getpid(), Role: role}.line()
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(line), 0)
	}
	return &Lock{f: f, path: path}, nil
}
