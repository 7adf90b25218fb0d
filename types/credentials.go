package types

// Annotations of the self-hosted components' credential Secrets
// (kube-system/kube-apiserver, kube-controller-manager, kube-scheduler).
// No pod mounts those Secrets, so the Node authorizer lets no kubelet read
// them; bootlet mirrors each onto its master's disk and the pods mount that
// directory (package credmirror).
const (
	// LabelCredentials marks a credential Secret, so that a master's
	// bootlet watches only these Secrets.
	LabelCredentials = "bootlet.dev/credentials"
	// AnnotationCredentialDir is the absolute host directory the Secret is
	// mirrored to on every master: the hostPath of the component's pods.
	AnnotationCredentialDir = "bootlet.dev/credential-dir"
	// AnnotationCredentialItems is the JSON list of the Secret's keys and
	// the paths they take in that directory (a Secret volume's items).
	AnnotationCredentialItems = "bootlet.dev/credential-items"
)

// CheckpointerUser is the user name of a master's bootlet (its
// checkpointer, serving gate and credential mirror): the CN of render's
// pki/kubeconfig/bootlet-checkpointer certificate, and of the one a node
// labelled a master asks for (masters/nodekeys).
const CheckpointerUser = "system:bootlet-checkpointer"

// MastersControllerUser is the user name of the identity a master that an
// administrator labelled makes for its candidate of the masters'
// controller, in system:masters, as render's admin identity is a
// first-boot master's (docs/security.md).
const MastersControllerUser = "system:bootlet-masters-controller"
