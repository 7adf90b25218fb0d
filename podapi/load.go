package podapi

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/checkpoint"
)

// decodeRecord decodes a stored object into obj; a record that does not decode, or whose identity the API
// refuses today, is quarantined (ok=false, err=nil); why: docs/design/architecture.md, "Quarantine".
func decodeRecord(store *checkpoint.Store, rec checkpoint.Record, obj runtime.Object) (ok bool, err error) {
	reason := ""
	if err := json.Unmarshal(rec.Data, obj); err != nil {
		reason = fmt.Sprintf("object does not decode as %s: %v", rec.Kind, err)
	} else if m, err := meta.Accessor(obj); err != nil {
		reason = err.Error()
	} else if m.GetNamespace() != rec.Namespace || m.GetName() != rec.Name {
		reason = fmt.Sprintf("object is %s/%s, stored as %s/%s", m.GetNamespace(), m.GetName(), rec.Namespace, rec.Name)
	} else if errs := validateStoredIdentity(m); len(errs) > 0 {
		reason = fmt.Sprintf("%s %s/%s is invalid: %v", rec.Kind, rec.Namespace, rec.Name, errs.ToAggregate())
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

// validateStoredIdentity is the API's check of what identifies a stored
// object: its UID's form (validateUID), its namespace (a DNS label) and its
// name (a DNS subdomain, as pods, Secrets and ConfigMaps require).
func validateStoredIdentity(m metav1.Object) field.ErrorList {
	errs := validateUID(m.GetUID(), uidPath)
	for _, msg := range utilvalidation.IsDNS1123Label(m.GetNamespace()) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "namespace"), m.GetNamespace(), msg))
	}
	for _, msg := range utilvalidation.IsDNS1123Subdomain(m.GetName()) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), m.GetName(), msg))
	}
	return errs
}
