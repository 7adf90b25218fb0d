package types

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The desired-version object of an upgrade: one cluster-scoped
// ClusterVersion named "cluster", of the CRD render creates
// (manifests.ClusterVersionCRD), in the spirit of OpenShift's
// ClusterVersion. A person sets spec.desiredVersion; the upgrade
// controller reports in status what runs, the step under way and its
// conditions, and keeps the history. Why a CRD and not a ConfigMap:
// docs/design/upgrade.md, "The desired version: a CRD".
const (
	ClusterVersionGroup    = "bootlet.dev"
	ClusterVersionVersion  = "v1alpha1"
	ClusterVersionKind     = "ClusterVersion"
	ClusterVersionResource = "clusterversions"
	// ClusterVersionName is the one object's name.
	ClusterVersionName = "cluster"
)

// ClusterVersion is the desired-version object.
type ClusterVersion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ClusterVersionSpec   `json:"spec"`
	Status            ClusterVersionStatus `json:"status,omitempty"`
}

// ClusterVersionSpec is what a person asks for.
type ClusterVersionSpec struct {
	// DesiredVersion is the Kubernetes release to run, e.g. v1.37.2.
	DesiredVersion string `json:"desiredVersion"`
	// Retry is bumped to try the same desired version again after the
	// upgrade stopped: writing an unchanged spec does not change the
	// object's generation, which is what a stopped upgrade waits for.
	Retry int64 `json:"retry,omitempty"`
	// EtcdUpgrade false keeps etcd at the version it runs, as kubeadm's
	// `upgrade apply --etcd-upgrade=false` does (default true).
	EtcdUpgrade *bool `json:"etcdUpgrade,omitempty"`
}

// Versions are one release's component versions.
type Versions struct {
	Kubernetes string `json:"kubernetes,omitempty"`
	Etcd       string `json:"etcd,omitempty"`
	CoreDNS    string `json:"coreDNS,omitempty"`
}

// ComponentVersion is what one component runs on one node (no node: a
// cluster-wide add-on).
type ComponentVersion struct {
	Component string `json:"component"`
	Node      string `json:"node,omitempty"`
	Version   string `json:"version"`
}

// UpgradeStep is a component moved on a node, and when it began.
type UpgradeStep struct {
	Component string       `json:"component"`
	Node      string       `json:"node,omitempty"`
	From      string       `json:"from"`
	To        string       `json:"to"`
	Began     *metav1.Time `json:"began,omitempty"`
	// Drained is when the controller had cordoned and drained the node
	// for a kubelet's step (or found no drain needed): the node's agent
	// replaces the kubelet only after it.
	Drained *metav1.Time `json:"drained,omitempty"`
}

// UpgradeHistory is one past or current upgrade.
type UpgradeHistory struct {
	Version string `json:"version"`
	// State is Partial while under way or stopped, Completed once every
	// component runs Version, RolledBack when a step was put back.
	State          string       `json:"state"`
	StartedTime    metav1.Time  `json:"startedTime"`
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	Message        string       `json:"message,omitempty"`
}

// ClusterVersionStatus is what the controller reports.
type ClusterVersionStatus struct {
	// ObservedGeneration is the spec's generation the status is about.
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Current            Versions           `json:"current,omitempty"`
	Components         []ComponentVersion `json:"components,omitempty"`
	// Step is the step under way, as a person reads it.
	Step string `json:"step,omitempty"`
	// InFlight and RollingBack are the controller's progress, kept here
	// so a new leader resumes the same step; StoppedGeneration is the
	// generation the upgrade stopped on.
	InFlight          *UpgradeStep       `json:"inFlight,omitempty"`
	RollingBack       *UpgradeStep       `json:"rollingBack,omitempty"`
	StoppedGeneration int64              `json:"stoppedGeneration,omitempty"`
	Conditions        []metav1.Condition `json:"conditions,omitempty"`
	History           []UpgradeHistory   `json:"history,omitempty"`
}
