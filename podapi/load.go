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

// decodeRecord decodes a stored object into obj. A record the store verified
// but that does not decode as its kind, or names another object than its
// key, is quarantined (moved to ROOT/quarantine and reported like the files
// the store moves itself) instead of keeping the daemon from starting:
// ok=false, err=nil. err is set only if it cannot be moved aside.
//
// A record that decodes but whose identity the API would refuse today (a
// UID that is not a canonical UUID, a name or namespace that is not a DNS
// name), written by an older version that did not check it, is quarantined
// too: those become directory names, cgroup names and log paths, and a
// pod with a UID of ".." or "a_b" took the daemon (and its root dir) down.
// The spec is not validated again: a stricter validation in a newer version
// must not take a running control plane pod off a node at its next boot.
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
