package join

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	kubeconfigutil "k8s.io/kubernetes/cmd/kubeadm/app/util/kubeconfig"

	"github.com/bootlet/bootlet/internal/kubeclient"
	"github.com/bootlet/bootlet/manifests"
)

// userAgent names join's requests, on a master and on a worker, in the
// apiserver's logs and audit.
const userAgent = "bootlet-join"

// CreatedTokenTTL is the default lifetime of a --create-token token: it is
// made for a worker that joins now, with the line pasted at once.
const CreatedTokenTTL = time.Hour

// PrintCommand is `bootlet join print` on a master, as kubeadm's
// `kubeadm token create --print-join-command`: the apiserver's address and
// the cluster CA's hashes from assetDir, and the rendered bootstrap token,
// or with create a new one valid for ttl made in the cluster through
// admin.conf. The line goes to w.
func PrintCommand(ctx context.Context, assetDir string, create bool, ttl time.Duration, w io.Writer) error {
	if why := manifests.ValidateBootstrapTokenTTL(ttl); create && why != "" {
		return fmt.Errorf("--ttl %s: %s", ttl, why)
	}
	admin, err := clientcmd.LoadFromFile(filepath.Join(assetDir, manifests.AdminKubeconfig))
	if err != nil {
		return err
	}
	_, cluster, err := kubeconfigutil.GetClusterFromKubeConfig(admin)
	if err != nil {
		return fmt.Errorf("%s: %w", manifests.AdminKubeconfig, err)
	}
	endpoint, err := apiEndpoint(cluster.Server)
	if err != nil {
		return err
	}
	cas, err := certutil.CertsFromFile(filepath.Join(assetDir, manifests.PKIDir, manifests.CA+".crt"))
	if err != nil {
		return err
	}
	// Every CA of ca.crt (two during a CA rotation): a worker then
	// accepts either.
	hashes := make([]string, 0, len(cas))
	for _, ca := range cas {
		hashes = append(hashes, manifests.CACertHash(ca))
	}
	var token string
	if create {
		t, err := manifests.NewBootstrapToken(time.Now().Add(ttl))
		if err != nil {
			return err
		}
		_, cs, err := kubeclient.ForConfig(*admin, userAgent, 30*time.Second)
		if err != nil {
			return err
		}
		_, err = cs.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, manifests.BootstrapTokenSecret(t), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("a bootstrap token with ID %s exists already; run again", t.Token.ID)
		} else if err != nil {
			return fmt.Errorf("creating a bootstrap token: %w", err)
		}
		token = t.Token.String()
	} else {
		t, err := manifests.ReadBootstrapToken(assetDir)
		if err != nil {
			return fmt.Errorf("%w (render writes it; or make one in the cluster with --create-token)", err)
		}
		if t.Expires != nil && !time.Now().Before(t.Expires.Time) {
			return fmt.Errorf("the rendered bootstrap token %s expired at %s: make a new one with --create-token, or render again", t.Token.ID, t.Expires.UTC().Format(time.RFC3339))
		}
		token = t.Token.String()
	}
	fmt.Fprintln(w, joinCommandLine(endpoint, token, hashes))
	return nil
}
