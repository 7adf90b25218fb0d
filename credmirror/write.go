package credmirror

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"
)

// dataLink is the AtomicWriter's link to the current generation of files:
// a directory holds a complete mirror once it exists.
const dataLink = "..data"

// Mirror writes s into its target directory and reports whether any file
// changed. A directory that does not exist yet is filled beside it and
// renamed into place, so a pod that mounts it never sees it empty; one that
// exists is updated by the AtomicWriter, whose link swap lets a running
// apiserver reload whole files, never half of them.
func Mirror(s *v1.Secret, t Target) (changed bool, err error) {
	payload, err := Payload(s, t)
	if err != nil {
		return false, err
	}
	if Complete(t.Dir) {
		if same, err := holds(t.Dir, payload); err != nil || same {
			return false, err
		}
		return true, write(t.Dir, payload)
	}
	return true, create(t.Dir, payload)
}

// Complete reports whether dir holds a mirror (the AtomicWriter's data
// link exists).
func Complete(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, dataLink))
	return err == nil
}

func create(dir string, payload map[string]volumeutil.FileProjection) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".new-")
	if err != nil {
		return err
	}
	if err := write(tmp, payload); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	// An empty directory left by an earlier crash (or made by the runtime
	// for a pod that started too soon) is replaced; anything else is not
	// ours to remove.
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("credential directory %s exists and is not a mirror: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	return nil
}

func write(dir string, payload map[string]volumeutil.FileProjection) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	w, err := volumeutil.NewAtomicWriter(dir, "bootlet credentials")
	if err != nil {
		return err
	}
	return w.Write(payload, nil)
}

// holds reports whether dir already holds exactly payload's bytes.
func holds(dir string, payload map[string]volumeutil.FileProjection) (bool, error) {
	for path, f := range payload {
		b, err := os.ReadFile(filepath.Join(dir, path))
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if !bytes.Equal(b, f.Data) {
			return false, nil
		}
	}
	return true, nil
}

// Read is the mirror's content by Secret key: what the components on this
// master read now. A file that is missing is an error.
func Read(t Target) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, it := range t.Items {
		b, err := os.ReadFile(filepath.Join(t.Dir, it.Path))
		if err != nil {
			return nil, err
		}
		out[it.Key] = b
	}
	return out, nil
}
