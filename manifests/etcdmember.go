package manifests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientsetscheme "k8s.io/client-go/kubernetes/scheme"
)

// EtcdMember is what a tool acting on the node's etcd member (`bootlet etcd
// snapshot`) needs to know of it: its identity in the cluster, where its data
// lives, and how to reach it as a client. Paths are host paths.
//
// It is read back from the rendered etcd pod rather than recomputed from a
// Config because the Config is not stored anywhere: the pod is the only record
// of the node name and advertise address render was given, and it is what the
// running member was started with.
type EtcdMember struct {
	// Name is the member's --name (render's --node-name).
	Name string
	// PeerURLs are its --initial-advertise-peer-urls.
	PeerURLs []string
	// InitialCluster is its --initial-cluster.
	InitialCluster string
	// DataDir is the host directory of its data (render's --etcd-data-dir):
	// the hostPath mounted at its --data-dir.
	DataDir string
	// ClientURL is the first of its --listen-client-urls, the loopback one
	// in render's pod, so a tool on the node never depends on the advertise
	// address still being assigned.
	ClientURL string
	// CAFile is the etcd CA, which signs the member's serving certificate.
	// CertFile and KeyFile are the etcd healthcheck client's pair: the
	// client certificate kubeadm's own etcd operations use, so a tool does
	// not borrow the apiserver's identity.
	CAFile, CertFile, KeyFile string
}

// EtcdManifestPath is where render writes the bootstrap etcd pod under assetDir.
func EtcdManifestPath(assetDir string) string {
	return filepath.Join(assetDir, BootstrapManifestsDir, Etcd+".yaml")
}

// LoadEtcdMember reads the etcd pod render wrote under assetDir.
func LoadEtcdMember(assetDir string) (EtcdMember, error) {
	path := EtcdManifestPath(assetDir)
	data, err := os.ReadFile(path)
	if err != nil {
		return EtcdMember{}, fmt.Errorf("reading the rendered etcd pod: %w (is %s the --asset-dir of `bootlet render`?)", err, assetDir)
	}
	obj, _, err := serializer.NewCodecFactory(clientsetscheme.Scheme).UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return EtcdMember{}, fmt.Errorf("%s: %w", path, err)
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return EtcdMember{}, fmt.Errorf("%s holds a %T, not a Pod", path, obj)
	}
	m, err := EtcdMemberFromPod(pod, assetDir)
	if err != nil {
		return EtcdMember{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// EtcdMemberFromPod reads the member out of an etcd pod as render writes it
// (kubeadm's flags, host paths under assetDir).
func EtcdMemberFromPod(pod *v1.Pod, assetDir string) (EtcdMember, error) {
	var ctr *v1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == Etcd {
			ctr = &pod.Spec.Containers[i]
		}
	}
	if ctr == nil {
		return EtcdMember{}, fmt.Errorf("pod %s/%s has no %s container", pod.Namespace, pod.Name, Etcd)
	}
	flags := map[string]string{}
	for _, arg := range append(append([]string(nil), ctr.Command...), ctr.Args...) {
		if name, value, ok := strings.Cut(strings.TrimPrefix(arg, "--"), "="); ok && strings.HasPrefix(arg, "--") {
			flags[name] = value
		}
	}
	m := EtcdMember{
		Name:           flags["name"],
		InitialCluster: flags["initial-cluster"],
		CAFile:         filepath.Join(assetDir, PKIDir, EtcdCA+".crt"),
		CertFile:       filepath.Join(assetDir, PKIDir, EtcdHealthcheckClient+".crt"),
		KeyFile:        filepath.Join(assetDir, PKIDir, EtcdHealthcheckClient+".key"),
	}
	if v := flags["initial-advertise-peer-urls"]; v != "" {
		m.PeerURLs = strings.Split(v, ",")
	}
	if v := flags["listen-client-urls"]; v != "" {
		m.ClientURL = strings.Split(v, ",")[0]
	}
	var missing []string
	for _, f := range []struct{ flag, value string }{
		{"name", m.Name}, {"initial-cluster", m.InitialCluster},
		{"initial-advertise-peer-urls", strings.Join(m.PeerURLs, ",")}, {"listen-client-urls", m.ClientURL}, {"data-dir", flags["data-dir"]},
	} {
		if f.value == "" {
			missing = append(missing, "--"+f.flag)
		}
	}
	if len(missing) > 0 {
		return EtcdMember{}, fmt.Errorf("the etcd container has no %s", strings.Join(missing, ", "))
	}
	// --data-dir is a path inside the container; the member's data is
	// wherever the volume mounted there comes from on the host.
	dataDir := filepath.Clean(flags["data-dir"])
	for _, vm := range ctr.VolumeMounts {
		if filepath.Clean(vm.MountPath) != dataDir {
			continue
		}
		for _, vol := range pod.Spec.Volumes {
			if vol.Name == vm.Name && vol.HostPath != nil {
				m.DataDir = vol.HostPath.Path
			}
		}
	}
	if m.DataDir == "" {
		return EtcdMember{}, fmt.Errorf("no hostPath volume is mounted at the etcd container's --data-dir %s", dataDir)
	}
	return m, nil
}
