package manifests

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"
	"k8s.io/kubernetes/cmd/kubeadm/app/phases/controlplane"
	etcdphase "k8s.io/kubernetes/cmd/kubeadm/app/phases/etcd"
	kubeadmutil "k8s.io/kubernetes/cmd/kubeadm/app/util"
	etcdutil "k8s.io/kubernetes/cmd/kubeadm/app/util/etcd"

	btypes "github.com/bootlet/bootlet/types"
)

// Directory and file names under the asset dir.
const (
	PKIDir                = "pki"
	BootstrapManifestsDir = "bootstrap-manifests"
	SelfHostedDir         = "self-hosted"
)

// Component names, which are also the pod names and manifest file names.
const (
	Etcd                  = kubeadmconstants.Etcd                  // etcd
	KubeAPIServer         = kubeadmconstants.KubeAPIServer         // kube-apiserver
	KubeControllerManager = kubeadmconstants.KubeControllerManager // kube-controller-manager
	KubeScheduler         = kubeadmconstants.KubeScheduler         // kube-scheduler
)

// Components in the order bootlet should start them.
var Components = []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler}

// Image settings: upstream names and tags, so the manifests read like any
// kubeadm cluster's. EtcdImageTag is kubeadm v1.36's etcd.
const (
	ImageRepository = "registry.k8s.io"
	EtcdImageTag    = kubeadmconstants.DefaultEtcdVersion // 3.6.8-0
)

// containerKubernetesDir is where the credentials appear inside the pods
// (kubeadm's /etc/kubernetes), so every flag reads as in a kubeadm cluster.
const containerKubernetesDir = kubeadmconstants.KubernetesDir

// permitPortSharing is the one flag bootlet adds to kubeadm's commands. It
// sets SO_REUSEPORT on the secure listener, so that during the pivot the
// bootstrap and the self-hosted incarnation of a component can listen on the
// same port at once. For the apiserver this is what makes the handoff free of
// failed requests. The controller-manager and the scheduler get it too: they
// bind 127.0.0.1:10257/10259 in both incarnations, and without it the
// self-hosted one would crash-loop on "address already in use" and never turn
// Ready, so the bootstrap pod would never be withdrawn. Both sockets must set
// SO_REUSEPORT for the kernel to allow the second bind, which is why it is on
// the bootstrap pods as well.
var permitPortSharing = kubeadmapi.Arg{Name: "permit-port-sharing", Value: "true"}

// Every apiserver bootlet renders (bootstrap, self-hosted, and so the checkpoint) is ready for
// the hand-over of its port: the flags and why, docs/design/pivot.md, "The apiservers' flags".
var (
	apiserverHandoverArgs = []kubeadmapi.Arg{
		{Name: "goaway-chance", Value: "0.02"},
		{Name: "shutdown-delay-duration", Value: "5s"},
		{Name: "shutdown-watch-termination-grace-period", Value: "10s"},
	}
	apiserverPlainTCP = kubeadmapi.EnvVar{EnvVar: v1.EnvVar{Name: "GODEBUG", Value: "multipathtcp=0"}}
)

// clusterSigningCert points the controller-manager's CSR signer at the
// single-certificate pki/ca-signing.crt (see CASigning) rather than at
// kubeadm's pki/ca.crt; --cluster-signing-key-file stays pki/ca.key.
var clusterSigningCert = kubeadmapi.Arg{Name: "cluster-signing-cert-file", Value: filepath.Join(containerKubernetesDir, PKIDir, CASigning+".crt")}

// authenticationConfig is the apiserver's --authentication-config
// (AuthenticationConfigFile, anonymous requests only to AnonymousPaths; why:
// docs/security.md, "Workers join: the bootstrap token and anonymous cluster-info")
// and the volume that brings the file in.
// The file lives at the top of /etc/kubernetes, which kubeadm does not
// mount: the bootstrap pod gets it as a hostPath of the asset dir, the
// self-hosted pod from its Secret, like every other file its flags name.
var (
	authenticationConfigPath = filepath.Join(containerKubernetesDir, AuthenticationConfigFile)
	authenticationConfigArg  = kubeadmapi.Arg{Name: "authentication-config", Value: authenticationConfigPath}
	authenticationConfigVol  = kubeadmapi.HostPathMount{
		Name: "authentication-config", HostPath: authenticationConfigPath, MountPath: authenticationConfigPath,
		ReadOnly: true, PathType: v1.HostPathFile,
	}
)

// bootstrapAPIServerArgs are added to the bootstrap apiserver only; why:
// docs/design/pivot.md, "`default/kubernetes` never goes empty".
var bootstrapAPIServerArgs = []string{"--endpoint-reconciler-type=none"}

// clusterConfiguration is the kubeadm ClusterConfiguration equivalent to c,
// as `kubeadm init` would have defaulted it.
func clusterConfiguration(c Config) *kubeadmapi.ClusterConfiguration {
	cc := &kubeadmapi.ClusterConfiguration{
		KubernetesVersion: c.KubernetesVersion,
		ImageRepository:   ImageRepository,
		CertificatesDir:   filepath.Join(containerKubernetesDir, PKIDir),
		ClusterName:       clusterName,
		Networking: kubeadmapi.Networking{
			ServiceSubnet: c.ServiceCIDR,
			PodSubnet:     c.PodCIDR,
			DNSDomain:     c.ClusterDomain,
		},
		Etcd: kubeadmapi.Etcd{Local: &kubeadmapi.LocalEtcd{
			DataDir:   c.EtcdDataDir,
			ImageMeta: kubeadmapi.ImageMeta{ImageTag: EtcdImageTag},
			// An upgrade's helper member shares the member's client
			// address while it restarts, so the apiserver that names
			// that address keeps an etcd (upgrade/etcdservers.go).
			ExtraArgs: []kubeadmapi.Arg{{Name: "socket-reuse-port", Value: "true"}},
		}},
		APIServer: kubeadmapi.APIServer{ControlPlaneComponent: kubeadmapi.ControlPlaneComponent{
			ExtraArgs:    append(append([]kubeadmapi.Arg{permitPortSharing}, apiserverHandoverArgs...), authenticationConfigArg, admissionConfigArg),
			ExtraEnvs:    []kubeadmapi.EnvVar{apiserverPlainTCP},
			ExtraVolumes: []kubeadmapi.HostPathMount{authenticationConfigVol, admissionConfigVol},
		}},
		ControllerManager: kubeadmapi.ControlPlaneComponent{ExtraArgs: []kubeadmapi.Arg{permitPortSharing, clusterSigningCert}},
		Scheduler:         kubeadmapi.ControlPlaneComponent{ExtraArgs: []kubeadmapi.Arg{permitPortSharing}},
	}
	// kube-proxy's kubeconfig names it (kubeadm's GetControlPlaneEndpoint).
	cc.ControlPlaneEndpoint = c.ControlPlaneEndpoint
	if len(c.Masters) > 0 {
		// The members bootstrap together (docs/cluster.md, "Three
		// masters"), so the cluster is new to each of them; kubeadm's
		// GetEtcdPodSpec says existing when given members, as for a member
		// joining a running cluster.
		cc.Etcd.Local.ExtraArgs = append(cc.Etcd.Local.ExtraArgs, kubeadmapi.Arg{Name: "initial-cluster-state", Value: "new"})
	}
	cc.APIServer.ExtraArgs = append(cc.APIServer.ExtraArgs, serviceAccountJWKSURI(c))
	// Only a non-default value is passed as an override, so the default
	// keeps kubeadm's flag order.
	if strings.Join(c.EtcdServers, ",") != strings.Join(DefaultEtcdServers, ",") {
		cc.APIServer.ExtraArgs = append(cc.APIServer.ExtraArgs, kubeadmapi.Arg{Name: "etcd-servers", Value: strings.Join(c.EtcdServers, ",")})
	}
	return cc
}

// serviceAccountJWKSURI names the API address in the service account
// issuer's discovery document. Left to itself an apiserver names its own
// address there (its --advertise-address), which only the masters render
// made have in the serving certificate they all share: a relying party
// sent to a master labelled later would be refused its certificate. The
// API address (the control-plane endpoint, else the master's address) is in
// that certificate and reaches every master's keys, as the document needs.
// Without an endpoint a cluster has one master render made: its address.
func serviceAccountJWKSURI(c Config) kubeadmapi.Arg {
	host, port := c.AdvertiseAddress, ""
	if c.ControlPlaneEndpoint != "" {
		host, port, _ = kubeadmutil.ParseHostPort(c.ControlPlaneEndpoint)
	}
	if port == "" {
		port = fmt.Sprint(c.APIServerPort)
	}
	return kubeadmapi.Arg{Name: "service-account-jwks-uri", Value: "https://" + net.JoinHostPort(host, port) + "/openid/v1/jwks"}
}

func apiEndpoint(c Config) *kubeadmapi.APIEndpoint {
	return &kubeadmapi.APIEndpoint{AdvertiseAddress: c.AdvertiseAddress, BindPort: c.APIServerPort}
}

// kubeadmPods are kubeadm's static pods for c, by component name, built by
// kubeadm's own code (controlplane.GetStaticPodSpecs, etcd.GetEtcdPodSpec).
// kubeadm's proxy environment (the *_proxy variables of whoever runs it) is
// left out so the output does not depend on the caller's environment.
func kubeadmPods(c Config) map[string]v1.Pod {
	cc := clusterConfiguration(c)
	ep := apiEndpoint(c)
	specs := controlplane.GetStaticPodSpecs(cc, ep, []kubeadmapi.EnvVar{})
	specs[Etcd] = etcdphase.GetEtcdPodSpec(cc, ep, c.NodeName, etcdMembers(c))
	return specs
}

// etcdMembers is every master as an etcd member (its name, its peer URL
// https://IP:2380), in the masters' order: the --initial-cluster of each.
// nil for one node, which kubeadm makes its own single-member cluster.
func etcdMembers(c Config) []etcdutil.Member {
	var members []etcdutil.Member
	for _, m := range c.Masters {
		members = append(members, etcdutil.Member{Name: m.Name, PeerURL: etcdutil.GetPeerURL(&kubeadmapi.APIEndpoint{AdvertiseAddress: m.Address})})
	}
	return members
}

// bootstrapPods are the four pods bootlet runs first, in Components order:
// kubeadm's static pods with three changes:
//   - every hostPath under /etc/kubernetes is moved under assetDir (mount
//     paths inside the containers stay kubeadm's, and so do the flags);
//   - metadata.uid is set (see PodUID);
//   - the apiserver gets bootstrapAPIServerArgs;
//   - a pod whose command reaches the apiserver through a kubeconfig
//     (--kubeconfig=, the controller-manager and the scheduler) gets
//     bootlet.dev/start-after: kube-apiserver, so bootlet starts it once the
//     apiserver serves, as systemd orders units (runner/startafter.go). They
//     can do nothing before, and starting them with etcd and the apiserver
//     only takes CPU from those (docs/bench.md, Bootstrap). The kubelet
//     ignores the annotation.
func bootstrapPods(c Config, assetDir string) ([]*v1.Pod, error) {
	specs := kubeadmPods(c)
	pods := make([]*v1.Pod, 0, len(Components))
	for _, name := range Components {
		spec, ok := specs[name]
		if !ok {
			return nil, fmt.Errorf("kubeadm did not produce a %s pod", name)
		}
		pod := spec.DeepCopy()
		for i := range pod.Spec.Volumes {
			hp := pod.Spec.Volumes[i].HostPath
			if hp == nil {
				continue
			}
			if rel, ok := underKubernetesDir(hp.Path); ok {
				hp.Path = filepath.Join(assetDir, rel)
			}
		}
		if name == KubeAPIServer {
			pod.Spec.Containers[0].Command = append(pod.Spec.Containers[0].Command, bootstrapAPIServerArgs...)
		}
		if name != KubeAPIServer && usesKubeconfig(pod.Spec.Containers[0].Command) {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[btypes.AnnotationStartAfter] = KubeAPIServer
		}
		pod.UID = PodUID(pod.Namespace, pod.Name, c.NodeName)
		pods = append(pods, pod)
	}
	return pods, nil
}

// usesKubeconfig reports whether a command line names a kubeconfig
// (--kubeconfig=FILE or --kubeconfig FILE).
func usesKubeconfig(command []string) bool {
	for _, a := range command {
		if a == "--kubeconfig" || strings.HasPrefix(a, "--kubeconfig=") {
			return true
		}
	}
	return false
}

func underKubernetesDir(p string) (string, bool) {
	rel, err := filepath.Rel(containerKubernetesDir, filepath.Clean(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// uidNamespace scopes bootlet's name-based UIDs.
var uidNamespace = uuid.NewSHA1(uuid.NameSpaceDNS, []byte("bootlet.dev"))

// PodUID is the fixed metadata.uid of a bootstrap pod: a name-based (SHA-1,
// version 5) UUID of namespace/name@node. The kubelet takes metadata.uid as
// a static pod's UID when it is set, so when it later reads these very files
// it sees the pods bootlet already runs and adopts them instead of starting
// new ones. The UID deliberately does not depend on the spec: an image change
// on re-render is then an in-place update in bootlet's API (and a container
// restart by hash in the kubelet), not a new pod.
func PodUID(namespace, name, node string) types.UID {
	return types.UID(uuid.NewSHA1(uidNamespace, []byte(namespace+"/"+name+"@"+node)).String())
}

// marshalPod is kubeadm's static pod serialization.
func marshalPod(pod *v1.Pod) ([]byte, error) {
	return kubeadmutil.MarshalToYaml(pod, v1.SchemeGroupVersion)
}
