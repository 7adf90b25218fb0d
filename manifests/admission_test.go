package manifests

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	apiserverinstall "k8s.io/apiserver/pkg/apis/apiserver/install"
	psaadmission "k8s.io/pod-security-admission/admission"
	psaconfig "k8s.io/pod-security-admission/admission/api"
	"k8s.io/pod-security-admission/admission/api/load"
	psavalidation "k8s.io/pod-security-admission/admission/api/validation"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/metrics"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"
)

// loadPodSecurityConfig reads the rendered admission configuration as the
// apiserver does: its --admission-control-config-file reader (strict, the
// apiserver.config.k8s.io types), then the PodSecurity plugin's own loader
// and validation of its entry.
func loadPodSecurityConfig(t *testing.T, path string) *psaconfig.PodSecurityConfiguration {
	t.Helper()
	scheme := runtime.NewScheme()
	apiserverinstall.Install(scheme)
	provider, err := admission.ReadAdmissionConfiguration([]string{PodSecurityPlugin}, path, scheme)
	if err != nil {
		t.Fatalf("the apiserver cannot read %s: %v", path, err)
	}
	r, err := provider.ConfigFor(PodSecurityPlugin)
	if err != nil || r == nil {
		t.Fatalf("%s has no %s configuration: %v", path, PodSecurityPlugin, err)
	}
	cfg, err := load.LoadFromReader(r)
	if err != nil {
		t.Fatalf("the PodSecurity plugin cannot load %s: %v", path, err)
	}
	if errs := psavalidation.ValidatePodSecurityConfiguration(cfg); len(errs) > 0 {
		t.Fatalf("the PodSecurity plugin refuses %s: %v", path, errs)
	}
	return cfg
}

// TestAdmissionConfig: the rendered file is what the apiserver reads; it
// enforces baseline by default, warns and audits restricted, and exempts
// kube-system alone; both apiserver incarnations read it.
func TestAdmissionConfig(t *testing.T) {
	dir := rendered(t)
	path := filepath.Join(dir, AdmissionConfigFile)
	cfg := loadPodSecurityConfig(t, path)
	d := cfg.Defaults
	baseline, restricted, latest := string(psaapi.LevelBaseline), string(psaapi.LevelRestricted), psaapi.VersionLatest
	if d.Enforce != baseline || d.Warn != restricted || d.Audit != restricted ||
		d.EnforceVersion != latest || d.WarnVersion != latest || d.AuditVersion != latest {
		t.Errorf("defaults %+v, want enforce baseline, warn and audit restricted, all latest", d)
	}
	if e := cfg.Exemptions; !slices.Equal(e.Namespaces, []string{metav1.NamespaceSystem}) || len(e.Usernames) != 0 || len(e.RuntimeClasses) != 0 {
		t.Errorf("exemptions %+v, want namespace kube-system only", e)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v (%v), want 0600", path, fi.Mode(), err)
	}

	// The bootstrap apiserver names it and mounts it from the asset dir.
	pod := readPod(t, filepath.Join(dir, BootstrapManifestsDir, KubeAPIServer+".yaml"))
	ctr := pod.Spec.Containers[0]
	if !slices.Contains(ctr.Command, "--admission-control-config-file=/etc/kubernetes/"+AdmissionConfigFile) {
		t.Errorf("bootstrap apiserver command %v", ctr.Command)
	}
	mounted := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == path {
			mounted[v.Name] = true
		}
	}
	found := false
	for _, m := range ctr.VolumeMounts {
		found = found || mounted[m.Name] && m.MountPath == "/etc/kubernetes/"+AdmissionConfigFile && m.ReadOnly
	}
	if !found {
		t.Errorf("the bootstrap apiserver does not mount %s read-only at /etc/kubernetes/%s", path, AdmissionConfigFile)
	}
	// The self-hosted apiserver gets the same bytes from its Secret.
	secrets := selfHostedSecrets(t, dir)
	carried := false
	for _, s := range secrets {
		if s.Name == KubeAPIServer {
			carried = string(s.Data[AdmissionConfigFile]) == string(data)
		}
	}
	if !carried {
		t.Errorf("the self-hosted apiserver's Secret does not carry %s", AdmissionConfigFile)
	}
	// Every master gets the same file.
	masters := renderedMasters(t)
	var first []byte
	for _, m := range []string{"master-1", "master-2", "master-3"} {
		b, err := os.ReadFile(filepath.Join(MasterDir(masters, m), AdmissionConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = b
		} else if string(b) != string(first) {
			t.Errorf("%s's %s differs from master-1's", m, AdmissionConfigFile)
		}
	}
}

type namespaces map[string]*v1.Namespace

func (n namespaces) GetNamespace(_ context.Context, name string) (*v1.Namespace, error) {
	if ns, ok := n[name]; ok {
		return ns, nil
	}
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}

type noPods struct{}

func (noPods) ListPods(context.Context, string) ([]*v1.Pod, error) { return nil, nil }

type noMetrics struct{}

func (noMetrics) RecordEvaluation(metrics.Decision, psaapi.LevelVersion, metrics.Mode, psaapi.Attributes) {
}
func (noMetrics) RecordExemption(psaapi.Attributes)   {}
func (noMetrics) RecordError(bool, psaapi.Attributes) {}

// TestAdmissionConfigDecisions runs upstream's Pod Security admission with
// the rendered configuration: a tenant's privileged or host-network pod is
// refused in a namespace without labels, a plain one is admitted (with
// restricted's warnings), kube-system's control-plane pods are exempt, and
// a namespace labelled enforce=privileged takes what it asks for.
func TestAdmissionConfigDecisions(t *testing.T) {
	cfg := loadPodSecurityConfig(t, filepath.Join(rendered(t), AdmissionConfigFile))
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &psaadmission.Admission{Configuration: cfg, Evaluator: eval, Metrics: noMetrics{},
		NamespaceGetter: namespaces{"host-tools": {ObjectMeta: metav1.ObjectMeta{Name: "host-tools",
			Labels: map[string]string{psaapi.EnforceLevelLabel: string(psaapi.LevelPrivileged)}}}},
		PodLister: noPods{}}
	if err := a.CompleteConfiguration(); err != nil {
		t.Fatal(err)
	}
	if err := a.ValidateConfiguration(); err != nil {
		t.Fatal(err)
	}
	plain := v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}
	privileged := *plain.DeepCopy()
	privileged.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
	hostNet := *plain.DeepCopy()
	hostNet.HostNetwork = true
	hostPath := *plain.DeepCopy()
	hostPath.Volumes = []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}}}}
	// kubeadm's apiserver pod, as render writes it: hostNetwork and hostPath.
	apiserver := readPod(t, filepath.Join(rendered(t), BootstrapManifestsDir, KubeAPIServer+".yaml")).Spec

	for _, c := range []struct {
		name, ns string
		spec     v1.PodSpec
		allowed  bool
	}{
		{"plain", "default", plain, true},
		{"privileged", "default", privileged, false},
		{"privileged in a new namespace", "tenant-a", privileged, false},
		{"hostNetwork", "tenant-a", hostNet, false},
		{"hostPath", "tenant-a", hostPath, false},
		{"kube-public", metav1.NamespacePublic, privileged, false},
		{"kube-node-lease", "kube-node-lease", hostNet, false},
		{"the apiserver in kube-system", metav1.NamespaceSystem, apiserver, true},
		{"privileged in kube-system", metav1.NamespaceSystem, privileged, true},
		{"privileged in a namespace labelled privileged", "host-tools", privileged, true},
	} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: c.ns}, Spec: c.spec}
		resp := a.Validate(context.Background(), &psaapi.AttributesRecord{Name: pod.Name, Namespace: c.ns,
			Kind: v1.SchemeGroupVersion.WithKind("Pod"), Resource: v1.SchemeGroupVersion.WithResource("pods"),
			Operation: admissionv1.Create, Object: pod, Username: "tenant"})
		if resp.Allowed != c.allowed {
			msg := ""
			if resp.Result != nil {
				msg = resp.Result.Message
			}
			t.Errorf("%s (%s): allowed %v, want %v: %s", c.name, c.ns, resp.Allowed, c.allowed, msg)
		}
		if c.name == "plain" && !strings.Contains(strings.Join(resp.Warnings, "\n"), "restricted") {
			t.Errorf("a plain pod in default got no restricted warning: %v", resp.Warnings)
		}
	}
}
