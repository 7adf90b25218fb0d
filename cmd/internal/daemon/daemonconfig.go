package daemon

// The daemon's configuration file (package config): which flag each of its
// fields stands for, and the kubelet's precedence, defaults < file < flags
// given on the command line. docs/configuration.md documents each field.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/config"
)

// configFileOptions are the flags about the file itself.
type configFileOptions struct {
	path    string
	writeTo string
	// resolved is the configuration the daemon runs with, once a file was
	// read or is to be written (resolveConfig).
	resolved *config.BootletConfiguration
}

func addConfigFileFlags(f *pflag.FlagSet, o *configFileOptions) {
	f.StringVar(&o.path, "config", "", "a BootletConfiguration file (bootlet.dev/v1alpha1, YAML or JSON; docs/configuration.md): its fields replace the defaults of the flags they stand for, and a flag given on the command line wins over its field")
	f.StringVar(&o.writeTo, "write-config-to", "", "write the configuration the daemon would run with (the defaults, then --config, then the flags given) as a complete BootletConfiguration file to this path (-: standard output), and exit without starting")
}

// configFlagOnly are the daemon's flags that have no field in the file, and
// why. A new flag must be added to configFields or here (a test holds
// them to it), so it cannot silently be missing from the file. klog's
// flags (-v, ...) stay flags too: the logging flags are set up before any
// file could be read.
var configFlagOnly = map[string]string{
	"config":          "names the file",
	"write-config-to": "a one-off action, not a setting",
	// As the kubelet's --hostname-override: one file serves every node of
	// an OS image, and the default (the host name) is per node already.
	"node-name":                     "differs per node",
	"checkpointer-kubelet-pods-url": "deprecated and ignored",
}

// configField ties a daemon flag to its field in the file: fromFile sets
// the flag's option from the field, toFile the field from the option.
type configField struct {
	flag, path string
	fromFile   func(*config.BootletConfiguration, *daemonOptions)
	toFile     func(*daemonOptions, *config.BootletConfiguration)
}

// bind makes a configField from the field and the option it stands for,
// and the conversions between their types.
func bind[F, O any](flag, path string, field func(*config.BootletConfiguration) *F, option func(*daemonOptions) *O,
	fromFile func(F) O, toFile func(O) F) configField {
	return configField{flag: flag, path: path,
		fromFile: func(c *config.BootletConfiguration, o *daemonOptions) { *option(o) = fromFile(*field(c)) },
		toFile:   func(o *daemonOptions, c *config.BootletConfiguration) { *field(c) = toFile(*option(o)) },
	}
}

// The conversions: the file's pointers (nil: unset) are set by the time
// fromFile runs, as the file is defaulted.
func same[T any](v T) T                                { return v }
func deref[T any](p *T) T                              { return *p }
func int32Ptr(p *int32) int                            { return int(*p) }
func toInt32Ptr(v int) *int32                          { return ptr.To(int32(v)) }
func fromDuration(d metav1.Duration) time.Duration     { return d.Duration }
func toDuration(d time.Duration) metav1.Duration       { return metav1.Duration{Duration: d} }
func fromDurationPtr(d *metav1.Duration) time.Duration { return d.Duration }
func toDurationPtr(d time.Duration) *metav1.Duration   { return &metav1.Duration{Duration: d} }
func cloneStrings(s []string) []string                 { return append([]string{}, s...) }

// Short names keep each row of the table below on one line.
type bc = config.BootletConfiguration
type do = daemonOptions

// configFields are the daemon's flags that the file sets, in the order of
// docs/configuration.md.
var configFields = []configField{
	bind("runtime-endpoint", "runtimeEndpoint", func(c *bc) *string { return &c.RuntimeEndpoint }, func(o *do) *string { return &o.RuntimeEndpoint }, same, same),
	bind("root-dir", "rootDir", func(c *bc) *string { return &c.RootDir }, func(o *do) *string { return &o.RootDir }, same, same),
	bind("pod-root-dir", "podRootDir", func(c *bc) *string { return &c.PodRootDir }, func(o *do) *string { return &o.PodRootDir }, same, same),
	bind("pod-log-dir", "podLogDir", func(c *bc) *string { return &c.PodLogDir }, func(o *do) *string { return &o.PodLogDir }, same, same),
	bind("container-log-dir", "containerLogDir", func(c *bc) **string { return &c.ContainerLogDir }, func(o *do) *string { return &o.ContainerLogDir }, deref, ptr.To),
	bind("cgroup-driver", "cgroupDriver", func(c *bc) *string { return &c.CgroupDriver }, func(o *do) *string { return &o.CgroupDriver }, same, same),
	bind("socket", "socket", func(c *bc) *string { return &c.Socket }, func(o *do) *string { return &o.Socket }, same, same),
	bind("socket-group", "socketGroup", func(c *bc) *string { return &c.SocketGroup }, func(o *do) *string { return &o.SocketGroup }, same, same),
	bind("read-only-socket", "readOnlySocket", func(c *bc) *string { return &c.ReadOnlySocket }, func(o *do) *string { return &o.LocalTrust.ReadOnlySocket }, same, same),
	bind("read-only-socket-group", "readOnlySocketGroup", func(c *bc) *string { return &c.ReadOnlySocketGroup }, func(o *do) *string { return &o.LocalTrust.ReadOnlySocketGroup }, same, same),
	bind("manifests-dir", "manifestsDir", func(c *bc) *string { return &c.ManifestsDir }, func(o *do) *string { return &o.ManifestsDir }, same, same),
	bind("preload-images", "preloadImages", func(c *bc) *string { return &c.PreloadImages }, func(o *do) *string { return &o.PreloadImages }, same, same),
	bind("release-startup-pages", "releaseStartupPages", func(c *bc) **bool { return &c.ReleaseStartupPages }, func(o *do) *bool { return &o.ReleaseStartupPages }, deref, ptr.To),
	bind("fsync-ready-timeout", "fsyncReadyTimeout", func(c *bc) **metav1.Duration { return &c.FsyncReadyTimeout }, func(o *do) *time.Duration { return &o.LocalTrust.FsyncReadyTimeout }, fromDurationPtr, toDurationPtr),
	bind("kubeconfig-max-validity", "kubeconfigMaxValidity", func(c *bc) *metav1.Duration { return &c.KubeconfigMaxValidity }, func(o *do) *time.Duration { return &o.LocalTrust.MaxMintValidity }, fromDuration, toDuration),
	bind("apiserver-handover-drain", "apiserverHandoverDrain", func(c *bc) **metav1.Duration { return &c.APIServerHandoverDrain }, func(o *do) *time.Duration { return &o.HandoverDrain }, fromDurationPtr, toDurationPtr),
	bind("cert-renew-before", "certRenewBefore", func(c *bc) **metav1.Duration { return &c.CertRenewBefore }, func(o *do) *time.Duration { return &o.CertRenewBefore }, fromDurationPtr, toDurationPtr),

	bind("listen", "listen.address", func(c *bc) *string { return &c.Listen.Address }, func(o *do) *string { return &o.TCP.Listen }, same, same),
	bind("tls-cert-file", "listen.tlsCertFile", func(c *bc) *string { return &c.Listen.TLSCertFile }, func(o *do) *string { return &o.TCP.CertFile }, same, same),
	bind("tls-private-key-file", "listen.tlsPrivateKeyFile", func(c *bc) *string { return &c.Listen.TLSPrivateKeyFile }, func(o *do) *string { return &o.TCP.KeyFile }, same, same),
	bind("client-ca-file", "listen.clientCAFile", func(c *bc) *string { return &c.Listen.ClientCAFile }, func(o *do) *string { return &o.TCP.ClientCAFile }, same, same),
	bind("client-ca-key-file", "listen.clientCAKeyFile", func(c *bc) *string { return &c.Listen.ClientCAKeyFile }, func(o *do) *string { return &o.TCP.ClientCAKeyFile }, same, same),
	bind("admin-group", "listen.adminGroups", func(c *bc) *[]string { return &c.Listen.AdminGroups }, func(o *do) *[]string { return &o.TCP.AdminGroups }, cloneStrings, cloneStrings),
	bind("reader-group", "listen.readerGroups", func(c *bc) *[]string { return &c.Listen.ReaderGroups }, func(o *do) *[]string { return &o.TCP.ReaderGroups }, cloneStrings, cloneStrings),

	bind("pod-security-level", "podSecurity.level", func(c *bc) *string { return &c.PodSecurity.Level }, func(o *do) *string { return &o.LocalTrust.PodSecurityLevel }, same, same),
	bind("pod-security-exempt-group", "podSecurity.exemptGroups", func(c *bc) *[]string { return &c.PodSecurity.ExemptGroups }, func(o *do) *[]string { return &o.LocalTrust.PodSecurityExemptions }, cloneStrings, cloneStrings),

	bind("max-pods", "limits.maxPods", func(c *bc) **int32 { return &c.Limits.MaxPods }, func(o *do) *int { return &o.Limits.MaxPods }, int32Ptr, toInt32Ptr),
	bind("max-requests-inflight", "limits.maxRequestsInFlight", func(c *bc) **int32 { return &c.Limits.MaxRequestsInFlight }, func(o *do) *int { return &o.Limits.API.MaxRequestsInFlight }, int32Ptr, toInt32Ptr),
	bind("max-requests-inflight-per-user", "limits.maxRequestsInFlightPerUser", func(c *bc) **int32 { return &c.Limits.MaxRequestsInFlightPerUser }, func(o *do) *int { return &o.Limits.API.MaxRequestsInFlightPerUser }, int32Ptr, toInt32Ptr),
	bind("max-watches", "limits.maxWatches", func(c *bc) **int32 { return &c.Limits.MaxWatches }, func(o *do) *int { return &o.Limits.API.MaxWatches }, int32Ptr, toInt32Ptr),
	bind("max-watches-per-user", "limits.maxWatchesPerUser", func(c *bc) **int32 { return &c.Limits.MaxWatchesPerUser }, func(o *do) *int { return &o.Limits.API.MaxWatchesPerUser }, int32Ptr, toInt32Ptr),
	bind("max-streams", "limits.maxStreams", func(c *bc) **int32 { return &c.Limits.MaxStreams }, func(o *do) *int { return &o.Limits.API.MaxStreams }, int32Ptr, toInt32Ptr),
	bind("max-streams-per-user", "limits.maxStreamsPerUser", func(c *bc) **int32 { return &c.Limits.MaxStreamsPerUser }, func(o *do) *int { return &o.Limits.API.MaxStreamsPerUser }, int32Ptr, toInt32Ptr),
	bind("request-timeout", "limits.requestTimeout", func(c *bc) **metav1.Duration { return &c.Limits.RequestTimeout }, func(o *do) *time.Duration { return &o.Limits.API.RequestTimeout }, fromDurationPtr, toDurationPtr),

	bind("kubelet-healthz-url", "handoff.kubeletHealthzURL", func(c *bc) **string { return &c.Handoff.KubeletHealthzURL }, func(o *do) *string { return &o.KubeletHealthzURL }, deref, ptr.To),
	bind("kubelet-static-pod-path", "handoff.kubeletStaticPodPath", func(c *bc) **string { return &c.Handoff.KubeletStaticPodPath }, func(o *do) *string { return &o.KubeletStaticPodDir }, deref, ptr.To),
	bind("kubelet-binary", "handoff.kubeletBinary", func(c *bc) **string { return &c.Handoff.KubeletBinary }, func(o *do) *string { return &o.KubeletBinary }, deref, ptr.To),
	bind("kubelet-restart-command", "handoff.kubeletRestartCommand", func(c *bc) **string { return &c.Handoff.KubeletRestartCommand }, func(o *do) *string { return &o.KubeletRestartCommand }, deref, ptr.To),
	bind("kubelet-root-dir", "handoff.kubeletRootDir", func(c *bc) *string { return &c.Handoff.KubeletRootDir }, func(o *do) *string { return &o.KubeletRootDir }, same, same),
	bind("kubelet-actuated-checkpoint", "handoff.kubeletActuatedCheckpoint", func(c *bc) **bool { return &c.Handoff.KubeletActuatedCheckpoint }, func(o *do) *bool { return &o.KubeletActuated }, deref, ptr.To),

	bind("pivot-kubeconfig", "pivot.kubeconfig", func(c *bc) *string { return &c.Pivot.Kubeconfig }, func(o *do) *string { return &o.PivotKubeconfig }, same, same),
	bind("self-hosted-assets", "pivot.selfHostedAssets", func(c *bc) *string { return &c.Pivot.SelfHostedAssets }, func(o *do) *string { return &o.SelfHostedAssets }, same, same),
	bind("upgrade-gate-timeout", "pivot.upgradeGateTimeout", func(c *bc) **metav1.Duration { return &c.Pivot.UpgradeGateTimeout }, func(o *do) *time.Duration { return &o.UpgradeGateTimeout }, fromDurationPtr, toDurationPtr),
	bind("master-dead-after", "pivot.masterDeadAfter", func(c *bc) **metav1.Duration { return &c.Pivot.MasterDeadAfter }, func(o *do) *time.Duration { return &o.MasterDeadAfter }, fromDurationPtr, toDurationPtr),
	bind("tcp-migrate-req", "pivot.tcpMigrateReq", func(c *bc) **bool { return &c.Pivot.TCPMigrateReq }, func(o *do) *bool { return &o.TCPMigrateReq }, deref, ptr.To),

	bind("checkpointer-kubeconfig", "checkpointer.kubeconfig", func(c *bc) *string { return &c.Checkpointer.Kubeconfig }, func(o *do) *string { return &o.CheckpointerKubeconfig }, same, same),
	bind("checkpoint-namespaces", "checkpointer.namespaces", func(c *bc) *[]string { return &c.Checkpointer.Namespaces }, func(o *do) *[]string { return &o.CheckpointNamespaces }, cloneStrings, cloneStrings),
	bind("checkpointer-activate-after", "checkpointer.activateAfter", func(c *bc) **metav1.Duration { return &c.Checkpointer.ActivateAfter }, func(o *do) *time.Duration { return &o.CheckpointerActivate }, fromDurationPtr, toDurationPtr),
	bind("checkpointer-activate-after-start", "checkpointer.activateAfterStart", func(c *bc) **metav1.Duration { return &c.Checkpointer.ActivateAfterStart }, func(o *do) *time.Duration { return &o.CheckpointerStart }, fromDurationPtr, toDurationPtr),
	bind("checkpointer-withdraw-after", "checkpointer.withdrawAfter", func(c *bc) **metav1.Duration { return &c.Checkpointer.WithdrawAfter }, func(o *do) *time.Duration { return &o.CheckpointerWithdraw }, fromDurationPtr, toDurationPtr),
}

// resolveConfig applies the kubelet's precedence to o: the flags' defaults,
// then the file's fields, then the flags given on the command line
// (pflag's Changed, so a flag given with its default value still wins
// over the file). The result is validated as a whole, so a rule spanning a
// field and a flag sees both. Without --config and --write-config-to it
// does nothing: a daemon run with flags alone is checked as it always was.
func resolveConfig(fs *pflag.FlagSet, o *daemonOptions) error {
	if o.file.path == "" && o.file.writeTo == "" {
		return nil
	}
	c := config.Defaults()
	source := "the flags"
	if o.file.path != "" {
		source = "--config " + o.file.path + " and the flags"
		data, err := os.ReadFile(o.file.path)
		if err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		dir, err := filepath.Abs(filepath.Dir(o.file.path))
		if err != nil {
			return fmt.Errorf("--config %s: %w", o.file.path, err)
		}
		if c, err = config.Decode(data, dir); err != nil {
			return fmt.Errorf("--config %s: %w", o.file.path, err)
		}
	}
	for _, f := range configFields {
		if fs.Changed(f.flag) {
			f.toFile(o, c)
		}
	}
	if errs := config.Validate(c); len(errs) > 0 {
		return fmt.Errorf("invalid configuration (%s): %w", source, errs.ToAggregate())
	}
	for _, f := range configFields {
		f.fromFile(c, o)
	}
	o.file.resolved = c
	return nil
}

// effectiveConfig is the configuration o runs with, as a complete file,
// paths absolute: the daemon serves it to the CLI on the node. It is built
// from o, flags alone or a file, and not validated: resolveConfig decided
// what runs.
func effectiveConfig(o *daemonOptions) ([]byte, error) {
	c := config.Defaults()
	for _, f := range configFields {
		f.toFile(o, c)
	}
	if err := absPaths(c); err != nil {
		return nil, err
	}
	return config.Encode(c)
}

// absPaths makes every relative path of c absolute: in a file it would be
// relative to the file's directory, not the daemon's working directory.
func absPaths(c *config.BootletConfiguration) error {
	for _, p := range config.PathRefs(c) {
		if *p != "" && !filepath.IsAbs(*p) {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return err
			}
			*p = abs
		}
	}
	return nil
}

// writeConfig writes the resolved configuration as a complete file, every
// field spelled out, so an OS image can start from it and a unit's flags
// can be moved into a file. A relative path a flag gave is made absolute:
// in the file it would be relative to the file's directory.
func writeConfig(stdout io.Writer, o *daemonOptions) error {
	c := o.file.resolved
	if err := absPaths(c); err != nil {
		return err
	}
	body, err := config.Encode(c)
	if err != nil {
		return err
	}
	out := append([]byte("# bootlet daemon --config: every field, its flag and its default are in docs/configuration.md\n"), body...)
	if o.file.writeTo == "-" {
		_, err = stdout.Write(out)
		return err
	}
	return os.WriteFile(o.file.writeTo, out, 0o644)
}

// ConfigFlags maps each field of the configuration file (its path, as
// listen.address) to the flag it stands for, for the generated reference.
func ConfigFlags() map[string]string {
	m := make(map[string]string, len(configFields))
	for _, f := range configFields {
		m[f.path] = f.flag
	}
	return m
}
