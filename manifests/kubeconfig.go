package manifests

import (
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"
	kubeconfigutil "k8s.io/kubernetes/cmd/kubeadm/app/util/kubeconfig"
)

// Kubeconfig file names (kubeadm's).
const (
	AdminKubeconfig             = kubeadmconstants.AdminKubeConfigFileName             // admin.conf
	ControllerManagerKubeconfig = kubeadmconstants.ControllerManagerKubeConfigFileName // controller-manager.conf
	SchedulerKubeconfig         = kubeadmconstants.SchedulerKubeConfigFileName         // scheduler.conf
	KubeletKubeconfig           = kubeadmconstants.KubeletKubeConfigFileName           // kubelet.conf
)

// clusterName is kubeadm's default cluster name, used in every kubeconfig
// and as the controller-manager's --cluster-name.
const clusterName = "kubernetes"

// kubeconfigSpec is one kubeconfig: its file, the user it names, and the key
// pair (base name under pki/) it embeds.
type kubeconfigSpec struct {
	File, User, Pair string
}

// kubeconfigSpecs are kubeadm's four, with kubeadm's user names. The kubelet
// gets a client certificate for system:node:NODE in system:nodes rather than
// a bootstrap token: on a single master nothing could approve its CSR until
// the controller-manager runs, and the controller-manager does not run until
// the control plane is up, so a token would only add a step that can stall.
func kubeconfigSpecs(c Config) []kubeconfigSpec {
	return []kubeconfigSpec{
		{AdminKubeconfig, "kubernetes-admin", AdminClient},
		{ControllerManagerKubeconfig, kubeadmconstants.ControllerManagerUser, ControllerMgrClient},
		{SchedulerKubeconfig, kubeadmconstants.SchedulerUser, SchedulerClient},
		{KubeletKubeconfig, kubeadmconstants.NodesUserPrefix + c.NodeName, KubeletClient},
		checkpointerKubeconfigSpec(),
	}
}

// renderKubeconfig is the kubeconfig bytes for spec: kubeadm's layout
// (cluster "kubernetes", context USER@kubernetes, everything embedded),
// serialized by clientcmd, which sorts its maps, so it is deterministic.
func renderKubeconfig(c Config, spec kubeconfigSpec, pki *PKI) ([]byte, error) {
	kp := pki.Pairs[spec.Pair]
	cfg := kubeconfigutil.CreateWithCerts(c.APIServerURL(), clusterName, spec.User, pki.Pairs[CA].CertPEM, kp.KeyPEM, kp.CertPEM)
	return clientcmd.Write(*cfg)
}

func writeKubeconfigs(c Config, dir string, pki *PKI) error {
	for _, spec := range kubeconfigSpecs(c) {
		data, err := renderKubeconfig(c, spec, pki)
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, spec.File), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
