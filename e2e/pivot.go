//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/ownprocess"
)

// Helpers of the pivot test (pivot_test.go): a registered kubelet and the
// pod-side checks. The 50 ms probe client is prober.go, its verdict per
// request probe_classify.go, the watches of default/kubernetes and of
// kube-system's pods pivot_watch.go, the connection storm connectstorm.go.

// UseAPIServer makes the kubelet (not started yet) register with the
// apiserver of kubeconfig: render's kubelet.conf, whose client certificate
// is system:node:NODE for the kubelet's node name. Its configuration is
// then make up's (the same generator), on the test's ports and
// directories: Webhook authentication and authorization, client
// certificates of render's kubelet client CA only. Its ClientCert becomes
// the apiserver's kubelet client, which RBAC lets in.
func (k *Kubelet) UseAPIServer(t testing.TB, kubeconfig string) {
	t.Helper()
	pki := filepath.Join(filepath.Dir(kubeconfig), manifests.PKIDir)
	k.writeConfig(t, false, filepath.Join(pki, manifests.KubeletClientCA+".crt"))
	k.ClientCert = filepath.Join(pki, manifests.APIServerKubeletClnt+".crt")
	k.ClientKey = filepath.Join(pki, manifests.APIServerKubeletClnt+".key")
	k.Kubeconfig = kubeconfig
}

// staticCopy is the path of bootlet's static copy of a pod.
func staticCopy(k *Kubelet, ns, name string) string {
	return filepath.Join(k.ManifestDir, "bootlet_"+ns+"_"+name+".yaml")
}

// PodListens reports whether a process of the pod with uid holds a
// listening socket on port (this network namespace's, the host's for a
// hostNetwork pod): whether the pod still serves on it.
func PodListens(uid types.UID, port int) bool {
	contents, _ := ownprocess.ReadProcNetTCP()
	local := fmt.Sprintf(":%04X", port)
	listening := map[string]bool{}
	for _, c := range contents {
		for _, line := range strings.Split(c, "\n") {
			f := strings.Fields(line)
			if len(f) >= 10 && strings.HasSuffix(f[1], local) && f[3] == "0A" {
				listening[f[9]] = true
			}
		}
	}
	for _, proc := range ownprocess.Processes(ownprocess.InPod(uid)) {
		for inode := range ownprocess.SocketFDs(proc) {
			if listening[inode] {
				return true
			}
		}
	}
	return false
}
