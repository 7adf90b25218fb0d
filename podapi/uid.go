package podapi

import (
	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// uidPath is the field a UID error names.
var uidPath = field.NewPath("metadata", "uid")

// validateUID accepts a UID only in the form the apiserver hands out
// (uuid.NewUUID: lowercase 8-4-4-4-12 hex). bootlet honours a client's UID
// (a static pod keeps its identity across the handoff), and the UID becomes
// a directory name (ROOT/pods/UID, removed with RemoveAll), part of the pod
// log directory and of the pod's cgroup name, where the kubelet panics on
// '_' or '/'. The apiserver never validates a UID because it never takes
// one from a client; bootlet does, so it takes only what the apiserver
// would have made.
func validateUID(uid types.UID, path *field.Path) field.ErrorList {
	s := string(uid)
	parsed, err := uuid.Parse(s)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(path, s, "must be a UUID in canonical form (lowercase 8-4-4-4-12 hexadecimal, e.g. 0b3e2f4e-1111-2222-3333-444455556666)")}
	case parsed.String() != s:
		return field.ErrorList{field.Invalid(path, s, "must be a UUID in canonical form (lowercase 8-4-4-4-12 hexadecimal, e.g. "+parsed.String()+")")}
	}
	return nil
}
