package podclient

import (
	"context"

	"k8s.io/client-go/kubernetes"
)

// kubeconfigPath is where the daemon mints client certificates (podapi's
// serveKubeconfig), on its unix socket only.
const kubeconfigPath = "/bootlet/v1/kubeconfig"

// KubeconfigRequest is what the minted certificate says and how long it
// lives; empty fields leave the daemon's defaults.
type KubeconfigRequest struct {
	User   string   // the certificate's CN
	Groups []string // its O
	// Server is the URL clients reach the TCP listener at.
	Server string
	// Validity is a Go duration; the daemon caps it.
	Validity string
}

// Kubeconfig asks the daemon to sign a new client certificate and returns
// the kubeconfig it wraps it in. The daemon refuses unless cs talks to it
// over its unix socket.
func Kubeconfig(ctx context.Context, cs kubernetes.Interface, r KubeconfigRequest) ([]byte, error) {
	req := cs.CoreV1().RESTClient().Post().AbsPath(kubeconfigPath).Param("user", r.User)
	for _, g := range r.Groups {
		req = req.Param("group", g)
	}
	if r.Server != "" {
		req = req.Param("server", r.Server)
	}
	if r.Validity != "" {
		req = req.Param("validity", r.Validity)
	}
	return req.DoRaw(ctx)
}
