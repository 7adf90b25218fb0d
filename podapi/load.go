package podapi

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/checkpoint"
)

// decodeRecord decodes a stored object into obj. A record the store verified
// but that does not decode as its kind, or names another object than its
// key, is quarantined (moved to ROOT/quarantine and reported like the files
// the store moves itself) instead of keeping the daemon from starting:
// ok=false, err=nil. err is set only if it cannot be moved aside.
func decodeRecord(store *checkpoint.Store, rec checkpoint.Record, obj runtime.Object) (ok bool, err error) {
	reason := ""
	if err := json.Unmarshal(rec.Data, obj); err != nil {
		reason = fmt.Sprintf("object does not decode as %s: %v", rec.Kind, err)
	} else if m, err := meta.Accessor(obj); err != nil {
		reason = err.Error()
	} else if m.GetNamespace() != rec.Namespace || m.GetName() != rec.Name {
		reason = fmt.Sprintf("object is %s/%s, stored as %s/%s", m.GetNamespace(), m.GetName(), rec.Namespace, rec.Name)
	}
	if reason == "" {
		return true, nil
	}
	klog.ErrorS(nil, "Unusable checkpoint record; quarantining it", "kind", rec.Kind, "namespace", rec.Namespace, "name", rec.Name, "reason", reason)
	if err := store.Quarantine(rec.Kind, rec.Namespace, rec.Name, reason); err != nil {
		return false, fmt.Errorf("checkpoint %s %s/%s: %s; quarantining it failed: %w", rec.Kind, rec.Namespace, rec.Name, reason, err)
	}
	return false, nil
}
