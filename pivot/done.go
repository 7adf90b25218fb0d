package pivot

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/bootlet/bootlet/checkpoint"
)

// The durable record that the pivot to self-hosted is complete
// (docs/pivot.md). Once the bootstrap pods have been
// handed over, a restarted bootlet (a reboot) must not bring them back:
// --manifests-dir would create the withdrawn bootstrap pods again, and the
// pivot would create the self-hosted objects again from render's assets
// (a DaemonSet deleted on purpose would come back, on the rendered image).
// The record lives in bootlet's root dir, next to its checkpoints.

// DoneFileName is the record's file name in bootlet's root dir.
const DoneFileName = "pivot-done.json"

// DoneRecord is what the record holds.
type DoneRecord struct {
	CompletedAt time.Time `json:"completedAt"`
	// Components are the components whose bootstrap pods were handed over.
	Components []string `json:"components"`
}

// RecordPath is the record's path for bootlet's root dir.
func RecordPath(rootDir string) string { return filepath.Join(rootDir, DoneFileName) }

// ReadDone reads the record: nil when there is none. A record that
// does not decode is an error, never "not done": the caller decides.
func ReadDone(path string) (*DoneRecord, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r DoneRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// WriteDone writes the record durably (dotfile, fsync, rename).
func WriteDone(path string, r DoneRecord) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = checkpoint.WriteFileAtomic(path, append(data, '\n'))
	return err
}

// Pivoted reports whether ns/name is the bootstrap pod of one
// of the components a completed pivot (r) handed over: such a pod must not
// be created again from --manifests-dir. With no record, nothing was handed
// over.
func Pivoted(r *DoneRecord, comps []Component, ns, name string) bool {
	if r == nil {
		return false
	}
	for _, c := range comps {
		if c.Bootstrap.Namespace != ns || c.Bootstrap.Name != name {
			continue
		}
		for _, done := range r.Components {
			if done == c.Name {
				return true
			}
		}
	}
	return false
}
