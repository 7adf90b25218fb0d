package config

import (
	"net"
	"net/url"
	"strconv"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	psaapi "k8s.io/pod-security-admission/api"
)

// Validate checks a defaulted configuration (after flags were applied to
// it, so that a rule spanning two fields sees what the daemon will run
// with) and returns every problem, each at its field's path.
// ErrorList.ToAggregate makes them one error, as the kubelet's.
func Validate(c *BootletConfiguration) field.ErrorList {
	var errs field.ErrorList
	// The same forms the CRI client takes: unix:///path or a bare absolute path.
	if ep := c.RuntimeEndpoint; !(strings.HasPrefix(ep, "unix://") && len(ep) > len("unix://")) && !strings.HasPrefix(ep, "/") {
		errs = append(errs, field.Invalid(field.NewPath("runtimeEndpoint"), ep, "must be a unix:// URL or an absolute path of the CRI socket"))
	}
	for _, r := range []struct {
		name, value string
	}{{"rootDir", c.RootDir}, {"podLogDir", c.PodLogDir}, {"socket", c.Socket}} {
		if r.value == "" {
			errs = append(errs, field.Required(field.NewPath(r.name), ""))
		}
	}
	if c.CgroupDriver != CgroupDriverCgroupfs && c.CgroupDriver != CgroupDriverSystemd {
		errs = append(errs, field.NotSupported(field.NewPath("cgroupDriver"), c.CgroupDriver, []string{CgroupDriverCgroupfs, CgroupDriverSystemd}))
	}
	if c.ReadOnlySocket != "" && c.ReadOnlySocket == c.Socket {
		errs = append(errs, field.Invalid(field.NewPath("readOnlySocket"), c.ReadOnlySocket, "must not be the read-write socket"))
	}
	if c.ReadOnlySocket == "" && c.ReadOnlySocketGroup != "" {
		errs = append(errs, field.Invalid(field.NewPath("readOnlySocketGroup"), c.ReadOnlySocketGroup, "has no socket: readOnlySocket is empty"))
	}
	errs = append(errs, nonNegative(field.NewPath("fsyncReadyTimeout"), c.FsyncReadyTimeout)...)
	errs = append(errs, nonNegative(field.NewPath("apiserverHandoverDrain"), c.APIServerHandoverDrain)...)
	errs = append(errs, nonNegative(field.NewPath("certRenewBefore"), c.CertRenewBefore)...)
	if c.KubeconfigMaxValidity.Duration <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("kubeconfigMaxValidity"), c.KubeconfigMaxValidity.String(), "must be positive"))
	}
	errs = append(errs, validateListen(field.NewPath("listen"), &c.Listen)...)
	errs = append(errs, validatePodSecurity(field.NewPath("podSecurity"), &c.PodSecurity)...)
	errs = append(errs, validateLimits(field.NewPath("limits"), &c.Limits)...)
	errs = append(errs, validateHandoff(field.NewPath("handoff"), &c.Handoff)...)
	if c.Pivot.SelfHostedAssets != "" && c.Pivot.Kubeconfig == "" {
		errs = append(errs, field.Required(field.NewPath("pivot", "kubeconfig"), "selfHostedAssets are created in the apiserver the pivot's kubeconfig names"))
	}
	// A deleted master's member goes once it has not answered this long:
	// 0 would remove it at its first silence, a reboot included.
	if d := c.Pivot.MasterDeadAfter; d != nil && d.Duration <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("pivot", "masterDeadAfter"), d.String(), "must be positive: a master rebooting is not gone"))
	}
	errs = append(errs, validateCheckpointer(field.NewPath("checkpointer"), &c.Checkpointer)...)
	return errs
}

func validateListen(p *field.Path, l *ListenConfiguration) field.ErrorList {
	var errs field.ErrorList
	if l.Address != "" {
		if _, port, err := net.SplitHostPort(l.Address); err != nil {
			errs = append(errs, field.Invalid(p.Child("address"), l.Address, err.Error()))
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			errs = append(errs, field.Invalid(p.Child("address"), l.Address, "port must be a number from 0 to 65535"))
		}
	}
	// One without the other is a half-configured serving certificate: the
	// daemon would fail at start, or (key alone) silently make its own.
	if l.TLSCertFile != "" && l.TLSPrivateKeyFile == "" {
		errs = append(errs, field.Required(p.Child("tlsPrivateKeyFile"), "the key of tlsCertFile"))
	}
	if l.TLSCertFile == "" && l.TLSPrivateKeyFile != "" {
		errs = append(errs, field.Required(p.Child("tlsCertFile"), "the certificate of tlsPrivateKeyFile"))
	}
	if l.ClientCAFile == "" && l.ClientCAKeyFile != "" {
		errs = append(errs, field.Required(p.Child("clientCAFile"), "the certificate of clientCAKeyFile"))
	}
	errs = append(errs, groups(p.Child("adminGroups"), l.AdminGroups)...)
	errs = append(errs, groups(p.Child("readerGroups"), l.ReaderGroups)...)
	return errs
}

func validatePodSecurity(p *field.Path, s *PodSecurityConfiguration) field.ErrorList {
	var errs field.ErrorList
	if s.Level != "" {
		if _, err := psaapi.ParseLevel(s.Level); err != nil {
			errs = append(errs, field.NotSupported(p.Child("level"), s.Level,
				[]psaapi.Level{psaapi.LevelPrivileged, psaapi.LevelBaseline, psaapi.LevelRestricted}))
		}
	}
	return append(errs, groups(p.Child("exemptGroups"), s.ExemptGroups)...)
}

func validateLimits(p *field.Path, l *LimitsConfiguration) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		v    *int32
	}{
		{"maxPods", l.MaxPods}, {"maxRequestsInFlight", l.MaxRequestsInFlight}, {"maxRequestsInFlightPerUser", l.MaxRequestsInFlightPerUser},
		{"maxWatches", l.MaxWatches}, {"maxWatchesPerUser", l.MaxWatchesPerUser}, {"maxStreams", l.MaxStreams}, {"maxStreamsPerUser", l.MaxStreamsPerUser},
	} {
		if f.v != nil {
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*f.v), p.Child(f.name))...)
		}
	}
	return append(errs, nonNegative(p.Child("requestTimeout"), l.RequestTimeout)...)
}

func validateHandoff(p *field.Path, h *HandoffConfiguration) field.ErrorList {
	var errs field.ErrorList
	if h.KubeletHealthzURL != nil && *h.KubeletHealthzURL != "" {
		u, err := url.Parse(*h.KubeletHealthzURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(p.Child("kubeletHealthzURL"), *h.KubeletHealthzURL, "must be an http:// or https:// URL"))
		}
	}
	// The kubelet's root dir is where adopted pods' directories live and
	// where its actuated checkpoint is written, with the handoff on.
	if h.KubeletRootDir == "" && ptrString(h.KubeletHealthzURL) != "" && ptrString(h.KubeletStaticPodPath) != "" {
		errs = append(errs, field.Required(p.Child("kubeletRootDir"), "the handoff is on"))
	}
	return errs
}

func validateCheckpointer(p *field.Path, c *CheckpointerConfiguration) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, ns := range c.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("namespaces").Index(i), ns, strings.Join(msgs, "; ")))
		} else if seen.Has(ns) {
			errs = append(errs, field.Duplicate(p.Child("namespaces").Index(i), ns))
		}
		seen.Insert(ns)
	}
	errs = append(errs, nonNegative(p.Child("activateAfter"), c.ActivateAfter)...)
	errs = append(errs, nonNegative(p.Child("activateAfterStart"), c.ActivateAfterStart)...)
	errs = append(errs, nonNegative(p.Child("withdrawAfter"), c.WithdrawAfter)...)
	return errs
}

// groups are user groups as client certificates carry them (O).
func groups(p *field.Path, gs []string) field.ErrorList {
	var errs field.ErrorList
	for i, g := range gs {
		if strings.TrimSpace(g) == "" {
			errs = append(errs, field.Invalid(p.Index(i), g, "must not be empty"))
		}
	}
	return errs
}

func nonNegative(p *field.Path, d *metav1.Duration) field.ErrorList {
	if d != nil && d.Duration < 0 {
		return field.ErrorList{field.Invalid(p, d.String(), "must not be negative")}
	}
	return nil
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
