package manifests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// writeFile makes path hold exactly data with mode perm. An unchanged file is
// not rewritten (only its mode fixed), so a re-render leaves modification
// times alone and wakes no file watcher. A changed one is replaced by rename
// of a dotfile in the same directory, so a reader (the kubelet's static pod
// re-list, say) never sees half a file.
func writeFile(path string, data []byte, perm os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return os.Chmod(path, perm)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
