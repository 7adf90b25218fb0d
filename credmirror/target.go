package credmirror

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/volume/secret"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"
	"k8s.io/utils/ptr"

	btypes "github.com/bootlet/bootlet/types"
)

// FileMode of every mirrored file: only root reads a key, as kubeadm's
// pki/ and the Secret volume these directories replace (DefaultMode 0600).
const FileMode int32 = 0o600

// Target is where one Secret is mirrored and which of its keys go where.
type Target struct {
	// Dir is the absolute host directory, the components' hostPath.
	Dir string
	// Items map the Secret's keys to paths under Dir, as a Secret
	// volume's items do.
	Items []v1.KeyToPath
}

// Annotate records t on s: render's side of the contract.
func Annotate(s *v1.Secret, t Target) error {
	items, err := json.Marshal(t.Items)
	if err != nil {
		return err
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[btypes.LabelCredentials] = ""
	s.Annotations[btypes.AnnotationCredentialDir] = t.Dir
	s.Annotations[btypes.AnnotationCredentialItems] = string(items)
	return nil
}

// TargetOf is the mirror target s asks for. ok is false when s carries no
// bootlet.dev/credential-dir: it is not a credential Secret. The directory
// must be absolute, clean and end in the Secret's own name, so that one
// Secret can never overwrite another's directory or a system path by
// accident; whoever may write a kube-system Secret may already run a
// privileged pod there, so the annotation gives no new power.
func TargetOf(s *v1.Secret) (t Target, ok bool, err error) {
	dir, ok := s.Annotations[btypes.AnnotationCredentialDir]
	if !ok {
		return Target{}, false, nil
	}
	ann := field.NewPath("metadata", "annotations")
	if s.Namespace != "" && s.Namespace != metav1.NamespaceSystem {
		return Target{}, true, field.Invalid(field.NewPath("metadata", "namespace"), s.Namespace, "credential Secrets live in kube-system")
	}
	switch {
	case !filepath.IsAbs(dir) || filepath.Clean(dir) != dir:
		return Target{}, true, field.Invalid(ann.Key(btypes.AnnotationCredentialDir), dir, "must be an absolute, clean path")
	case filepath.Base(dir) != s.Name || filepath.Dir(dir) == dir:
		return Target{}, true, field.Invalid(ann.Key(btypes.AnnotationCredentialDir), dir, "must end in the Secret's name, "+s.Name)
	}
	if err := json.Unmarshal([]byte(s.Annotations[btypes.AnnotationCredentialItems]), &t.Items); err != nil {
		return Target{}, true, field.Invalid(ann.Key(btypes.AnnotationCredentialItems), s.Annotations[btypes.AnnotationCredentialItems], "must be a JSON list of {key, path}: "+err.Error())
	}
	if len(t.Items) == 0 {
		return Target{}, true, field.Required(ann.Key(btypes.AnnotationCredentialItems), "a credential Secret names at least one file")
	}
	t.Dir = dir
	return t, true, nil
}

// Payload is what the AtomicWriter writes for s at t: every item, mode
// 0600. A key the Secret lacks is an error, never an absent file.
func Payload(s *v1.Secret, t Target) (map[string]volumeutil.FileProjection, error) {
	p, err := secret.MakePayload(t.Items, s, ptr.To(FileMode), false)
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return p, nil
}
