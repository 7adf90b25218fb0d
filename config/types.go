package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the group of every file format bootlet defines (the
// checkpoint records are bootlet.dev/v1alpha1 too).
const GroupName = "bootlet.dev"

// SchemeGroupVersion and Kind identify the file.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

const Kind = "BootletConfiguration"

// BootletConfiguration is what `bootlet daemon --config FILE` reads: one
// field per daemon flag that belongs in a file shared by every node of an
// OS image. docs/configuration.md documents each field and its flag.
//
// Pointers mark the fields whose zero value means something other than
// the default (an empty URL turns the handoff off, 0 lifts a limit): nil
// is "not set", so the default applies. Every path is absolute once
// decoded; a relative one in the file is relative to the file's
// directory, as the kubelet's.
type BootletConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// RuntimeEndpoint is containerd's CRI socket (unix://).
	RuntimeEndpoint string `json:"runtimeEndpoint"`
	// RootDir is bootlet's state directory.
	RootDir string `json:"rootDir"`
	// PodRootDir is the root of the pods' kubelet-layout directories;
	// empty: handoff.kubeletRootDir with the handoff on, else rootDir.
	PodRootDir string `json:"podRootDir"`
	// PodLogDir is the kubelet's podLogsDirectory.
	PodLogDir string `json:"podLogDir"`
	// ContainerLogDir holds a link per container to its log; "": none.
	ContainerLogDir *string `json:"containerLogDir,omitempty"`
	// CgroupDriver is cgroupfs or systemd, as the kubelet's.
	CgroupDriver string `json:"cgroupDriver"`
	// Socket is the API's unix socket, SocketGroup the group that may use
	// it (mode 0660 then, else 0600).
	Socket      string `json:"socket"`
	SocketGroup string `json:"socketGroup"`
	// ReadOnlySocket serves reads and logs only; "": none.
	ReadOnlySocket      string `json:"readOnlySocket"`
	ReadOnlySocketGroup string `json:"readOnlySocketGroup"`
	// ManifestsDir is applied at every start; "": none.
	ManifestsDir string `json:"manifestsDir"`
	// PreloadImages is a directory of image archives imported at start.
	PreloadImages string `json:"preloadImages"`
	// ReleaseStartupPages unmaps the binary's pages after start-up and
	// bursts of pod work.
	ReleaseStartupPages *bool `json:"releaseStartupPages,omitempty"`
	// FsyncReadyTimeout fails /readyz while a checkpoint fsync is pending
	// this long; 0: never.
	FsyncReadyTimeout *metav1.Duration `json:"fsyncReadyTimeout,omitempty"`
	// KubeconfigMaxValidity is the longest (and default) lifetime of a
	// client certificate `bootlet kubeconfig` mints.
	KubeconfigMaxValidity metav1.Duration `json:"kubeconfigMaxValidity"`
	// APIServerHandoverDrain bounds the apiserver port's hand-over before
	// the pivot or the checkpointer withdraws an apiserver; 0: no routing.
	APIServerHandoverDrain *metav1.Duration `json:"apiserverHandoverDrain,omitempty"`
	// CertRenewBefore renews, at start and hourly, the certificates that
	// expire within it: bootlet's own serving certificate, and with
	// pivot.kubeconfig and pivot.selfHostedAssets the asset dir's (`bootlet
	// certs renew`); 0: never.
	CertRenewBefore *metav1.Duration `json:"certRenewBefore,omitempty"`

	Listen       ListenConfiguration       `json:"listen"`
	PodSecurity  PodSecurityConfiguration  `json:"podSecurity"`
	Limits       LimitsConfiguration       `json:"limits"`
	Handoff      HandoffConfiguration      `json:"handoff"`
	Pivot        PivotConfiguration        `json:"pivot"`
	Checkpointer CheckpointerConfiguration `json:"checkpointer"`
}

// ListenConfiguration is the API's TCP listener with mutual TLS, and who
// its client certificates make admin or reader.
type ListenConfiguration struct {
	// Address is HOST:PORT; "": no TCP listener, and the files below are
	// not read.
	Address string `json:"address"`
	// TLSCertFile and TLSPrivateKeyFile: "" for both makes and uses
	// ROOT/pki/apiserver.{crt,key}.
	TLSCertFile       string `json:"tlsCertFile"`
	TLSPrivateKeyFile string `json:"tlsPrivateKeyFile"`
	// ClientCAFile: "" makes and uses ROOT/pki/ca.crt.
	ClientCAFile    string `json:"clientCAFile"`
	ClientCAKeyFile string `json:"clientCAKeyFile"`
	// AdminGroups and ReaderGroups are client certificate groups (O);
	// [] grants nobody.
	AdminGroups  []string `json:"adminGroups"`
	ReaderGroups []string `json:"readerGroups"`
}

// PodSecurityConfiguration is Pod Security admission of pod creates.
type PodSecurityConfiguration struct {
	// Level is privileged, baseline or restricted; "": no check.
	Level        string   `json:"level"`
	ExemptGroups []string `json:"exemptGroups"`
}

// LimitsConfiguration is the API's limits; 0 lifts a limit.
type LimitsConfiguration struct {
	MaxPods                    *int32           `json:"maxPods,omitempty"`
	MaxRequestsInFlight        *int32           `json:"maxRequestsInFlight,omitempty"`
	MaxRequestsInFlightPerUser *int32           `json:"maxRequestsInFlightPerUser,omitempty"`
	MaxWatches                 *int32           `json:"maxWatches,omitempty"`
	MaxWatchesPerUser          *int32           `json:"maxWatchesPerUser,omitempty"`
	MaxStreams                 *int32           `json:"maxStreams,omitempty"`
	MaxStreamsPerUser          *int32           `json:"maxStreamsPerUser,omitempty"`
	RequestTimeout             *metav1.Duration `json:"requestTimeout,omitempty"`
}

// HandoffConfiguration is the handoff to the node's kubelet; "" for
// KubeletHealthzURL or KubeletStaticPodPath turns it off.
type HandoffConfiguration struct {
	KubeletHealthzURL    *string `json:"kubeletHealthzURL,omitempty"`
	KubeletStaticPodPath *string `json:"kubeletStaticPodPath,omitempty"`
	KubeletRootDir       string  `json:"kubeletRootDir"`
	// KubeletBinary is the file the kubelet's unit runs, which the
	// upgrade's node agent replaces ("": no agent); KubeletRestartCommand
	// restarts the kubelet through its unit.
	KubeletBinary             *string `json:"kubeletBinary,omitempty"`
	KubeletRestartCommand     *string `json:"kubeletRestartCommand,omitempty"`
	KubeletActuatedCheckpoint *bool   `json:"kubeletActuatedCheckpoint,omitempty"`
}

// PivotConfiguration is the pivot to self-hosted; "" Kubeconfig: none.
type PivotConfiguration struct {
	Kubeconfig       string `json:"kubeconfig"`
	SelfHostedAssets string `json:"selfHostedAssets"`
	TCPMigrateReq    *bool  `json:"tcpMigrateReq,omitempty"`
	// UpgradeGateTimeout is how long an upgrade step's gate may fail
	// before the upgrade controller puts the step back.
	UpgradeGateTimeout *metav1.Duration `json:"upgradeGateTimeout,omitempty"`
	// MasterDeadAfter is how long the etcd member of a master whose Node
	// was deleted must not answer before the masters' controller removes
	// it.
	MasterDeadAfter *metav1.Duration `json:"masterDeadAfter,omitempty"`
}

// CheckpointerConfiguration is the checkpointer of self-hosted pods; ""
// Kubeconfig: none.
type CheckpointerConfiguration struct {
	Kubeconfig string   `json:"kubeconfig"`
	Namespaces []string `json:"namespaces"`
	// Pointers: 0s is meaningful (activateAfterStart: 0s turns the fast
	// path after a restart off), so only a missing field takes the default.
	ActivateAfter      *metav1.Duration `json:"activateAfter,omitempty"`
	ActivateAfterStart *metav1.Duration `json:"activateAfterStart,omitempty"`
	WithdrawAfter      *metav1.Duration `json:"withdrawAfter,omitempty"`
}
