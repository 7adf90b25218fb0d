package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The daemon's defaults, the same as its flags' (cmd/internal/daemon's tests
// compare the two): the packages that own them do I/O, so they are
// repeated here rather than imported.
const (
	DefaultRuntimeEndpoint      = "unix:///run/containerd/containerd.sock"
	DefaultRootDir              = "/var/lib/bootlet"
	DefaultPodLogDir            = "/var/log/pods"
	DefaultContainerLogDir      = "/var/log/containers"
	DefaultCgroupDriver         = CgroupDriverCgroupfs
	DefaultSocket               = "/run/bootlet/bootlet.sock"
	DefaultKubeletHealthzURL    = "http://127.0.0.1:10248/healthz"
	DefaultKubeletStaticPodPath = "/etc/kubernetes/manifests"
	DefaultKubeletRootDir       = "/var/lib/kubelet"
	// DefaultKubeletBinary and DefaultKubeletRestartCommand are
	// bootlet-kubelet.service's (make install).
	DefaultKubeletBinary         = "/usr/local/libexec/bootlet/kubelet"
	DefaultKubeletRestartCommand = "systemctl restart bootlet-kubelet.service"
	DefaultAdminGroup            = "system:masters"
	DefaultReaderGroup           = "bootlet:readers"
	DefaultMaxPods               = 110

	DefaultFsyncReadyTimeout      = 10 * time.Second
	DefaultKubeconfigMaxValidity  = 24 * time.Hour
	DefaultAPIServerHandoverDrain = 10 * time.Second
	DefaultCertRenewBefore        = 30 * 24 * time.Hour
	DefaultActivateAfter          = 10 * time.Second
	DefaultActivateAfterStart     = 2 * time.Second
	DefaultWithdrawAfter          = 20 * time.Second
	// DefaultUpgradeGateTimeout is kubeadm's 5 minutes for a static pod
	// to come back (upgrade.GateTimeout).
	DefaultUpgradeGateTimeout = 5 * time.Minute
	// DefaultMasterDeadAfter is masters.DeadAfter: long enough for a
	// master's reboot.
	DefaultMasterDeadAfter = 5 * time.Minute
)

// The cgroup drivers, as the kubelet's.
const (
	CgroupDriverCgroupfs = "cgroupfs"
	CgroupDriverSystemd  = "systemd"
)

// DefaultLimits are podapi.DefaultLimits.
var DefaultLimits = LimitsConfiguration{
	MaxPods:             ptr.To[int32](DefaultMaxPods),
	MaxRequestsInFlight: ptr.To[int32](100), MaxRequestsInFlightPerUser: ptr.To[int32](50),
	MaxWatches: ptr.To[int32](100), MaxWatchesPerUser: ptr.To[int32](25),
	MaxStreams: ptr.To[int32](50), MaxStreamsPerUser: ptr.To[int32](10),
	RequestTimeout: &metav1.Duration{Duration: 60 * time.Second},
}

// SetDefaults fills every field left unset; it is what the daemon runs
// with when there is no file and no flag.
func SetDefaults(c *BootletConfiguration) {
	c.APIVersion, c.Kind = SchemeGroupVersion.String(), Kind
	defaultString(&c.RuntimeEndpoint, DefaultRuntimeEndpoint)
	defaultString(&c.RootDir, DefaultRootDir)
	defaultString(&c.PodLogDir, DefaultPodLogDir)
	defaultPtr(&c.ContainerLogDir, DefaultContainerLogDir)
	defaultString(&c.CgroupDriver, DefaultCgroupDriver)
	defaultString(&c.Socket, DefaultSocket)
	defaultPtr(&c.ReleaseStartupPages, true)
	defaultPtr(&c.FsyncReadyTimeout, metav1.Duration{Duration: DefaultFsyncReadyTimeout})
	defaultDuration(&c.KubeconfigMaxValidity, DefaultKubeconfigMaxValidity)
	defaultPtr(&c.APIServerHandoverDrain, metav1.Duration{Duration: DefaultAPIServerHandoverDrain})
	defaultPtr(&c.CertRenewBefore, metav1.Duration{Duration: DefaultCertRenewBefore})

	defaultSlice(&c.Listen.AdminGroups, DefaultAdminGroup)
	defaultSlice(&c.Listen.ReaderGroups, DefaultReaderGroup)
	defaultSlice(&c.PodSecurity.ExemptGroups, DefaultAdminGroup)

	l, d := &c.Limits, DefaultLimits
	defaultPtr(&l.MaxPods, *d.MaxPods)
	defaultPtr(&l.MaxRequestsInFlight, *d.MaxRequestsInFlight)
	defaultPtr(&l.MaxRequestsInFlightPerUser, *d.MaxRequestsInFlightPerUser)
	defaultPtr(&l.MaxWatches, *d.MaxWatches)
	defaultPtr(&l.MaxWatchesPerUser, *d.MaxWatchesPerUser)
	defaultPtr(&l.MaxStreams, *d.MaxStreams)
	defaultPtr(&l.MaxStreamsPerUser, *d.MaxStreamsPerUser)
	defaultPtr(&l.RequestTimeout, *d.RequestTimeout)

	defaultPtr(&c.Handoff.KubeletHealthzURL, DefaultKubeletHealthzURL)
	defaultPtr(&c.Handoff.KubeletStaticPodPath, DefaultKubeletStaticPodPath)
	defaultString(&c.Handoff.KubeletRootDir, DefaultKubeletRootDir)
	defaultPtr(&c.Handoff.KubeletBinary, DefaultKubeletBinary)
	defaultPtr(&c.Handoff.KubeletRestartCommand, DefaultKubeletRestartCommand)
	defaultPtr(&c.Handoff.KubeletActuatedCheckpoint, true)

	defaultPtr(&c.Pivot.TCPMigrateReq, true)
	defaultPtr(&c.Pivot.UpgradeGateTimeout, metav1.Duration{Duration: DefaultUpgradeGateTimeout})
	defaultPtr(&c.Pivot.MasterDeadAfter, metav1.Duration{Duration: DefaultMasterDeadAfter})

	defaultSlice(&c.Checkpointer.Namespaces, metav1.NamespaceSystem)
	defaultPtr(&c.Checkpointer.ActivateAfter, metav1.Duration{Duration: DefaultActivateAfter})
	defaultPtr(&c.Checkpointer.ActivateAfterStart, metav1.Duration{Duration: DefaultActivateAfterStart})
	defaultPtr(&c.Checkpointer.WithdrawAfter, metav1.Duration{Duration: DefaultWithdrawAfter})
}

// Defaults is a complete configuration with every default.
func Defaults() *BootletConfiguration {
	c := &BootletConfiguration{}
	SetDefaults(c)
	return c
}

func defaultString(s *string, d string) {
	if *s == "" {
		*s = d
	}
}

func defaultDuration(v *metav1.Duration, d time.Duration) {
	if v.Duration == 0 {
		v.Duration = d
	}
}

func defaultPtr[T any](p **T, d T) {
	if *p == nil {
		*p = &d
	}
}

// defaultSlice leaves an explicit [] alone: it means "none", not "unset".
func defaultSlice(s *[]string, d ...string) {
	if *s == nil {
		*s = d
	}
}
