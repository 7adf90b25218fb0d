package manifests

import (
	"encoding/json"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"
	psaapiv1 "k8s.io/pod-security-admission/admission/api/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"sigs.k8s.io/yaml"
)

// AdmissionConfigFile is the apiserver's --admission-control-config-file:
// the PodSecurity admission plugin's cluster-wide defaults
// (podSecurityConfiguration). It lives at the top of /etc/kubernetes, as
// AuthenticationConfigFile does, and reaches both apiserver incarnations
// the same way: the bootstrap pod mounts it from the asset dir, the
// self-hosted pod gets it from its Secret (the flag names it, so
// credentialFiles picks it up).
const AdmissionConfigFile = "admission-config.yaml"

// PodSecurityPlugin is the apiserver's built-in Pod Security admission
// plugin, on by default; the file only configures it.
const PodSecurityPlugin = "PodSecurity"

var (
	admissionConfigPath = filepath.Join(containerKubernetesDir, AdmissionConfigFile)
	admissionConfigArg  = kubeadmapi.Arg{Name: "admission-control-config-file", Value: admissionConfigPath}
	admissionConfigVol  = kubeadmapi.HostPathMount{
		Name: "admission-config", HostPath: admissionConfigPath, MountPath: admissionConfigPath,
		ReadOnly: true, PathType: v1.HostPathFile,
	}
)

// PodSecurityExemptNamespaces are the namespaces the PodSecurity defaults
// do not apply to: kube-system alone, where the control plane and the
// add-ons that need the host (kube-proxy) run. kube-public and
// kube-node-lease run no pods, so they get the defaults like any other
// namespace; kube-flannel opts out with its own namespace label, as
// upstream's manifest does.
var PodSecurityExemptNamespaces = []string{metav1.NamespaceSystem}

// podSecurityConfiguration is the PodSecurity plugin's configuration:
// every namespace without pod-security.kubernetes.io labels enforces the
// baseline standard (no host namespaces, hostPath, privileged containers,
// added capabilities beyond the default set...), and warns about and audits
// what restricted would refuse, as upstream's "Apply Pod Security Standards
// at the cluster level" does. A namespace's own labels still override
// these (a workload that needs the host is put in a namespace labelled
// enforce=privileged). The version is the apiserver's own (latest).
func podSecurityConfiguration() *psaapiv1.PodSecurityConfiguration {
	return &psaapiv1.PodSecurityConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: psaapiv1.SchemeGroupVersion.String(), Kind: "PodSecurityConfiguration"},
		Defaults: psaapiv1.PodSecurityDefaults{
			Enforce: string(psaapi.LevelBaseline), EnforceVersion: psaapi.VersionLatest,
			Audit: string(psaapi.LevelRestricted), AuditVersion: psaapi.VersionLatest,
			Warn: string(psaapi.LevelRestricted), WarnVersion: psaapi.VersionLatest,
		},
		Exemptions: psaapiv1.PodSecurityExemptions{Namespaces: PodSecurityExemptNamespaces},
	}
}

// admissionConfig is AdmissionConfigFile's content: an AdmissionConfiguration
// (apiserver.config.k8s.io/v1) whose one plugin entry embeds
// podSecurityConfiguration.
func admissionConfig() ([]byte, error) {
	ps, err := json.Marshal(podSecurityConfiguration())
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(&apiserverv1.AdmissionConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: apiserverv1.SchemeGroupVersion.String(), Kind: "AdmissionConfiguration"},
		Plugins: []apiserverv1.AdmissionPluginConfiguration{{
			Name:          PodSecurityPlugin,
			Configuration: &runtime.Unknown{Raw: ps, ContentType: runtime.ContentTypeJSON},
		}},
	})
}

// writeAdmissionConfig writes AdmissionConfigFile into the asset dir; the
// same bytes on every master.
func writeAdmissionConfig(dir string) error {
	data, err := admissionConfig()
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, AdmissionConfigFile), data, 0o600)
}
