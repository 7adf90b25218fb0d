package join

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bootlet/bootlet/internal/kubeclient"
	"github.com/bootlet/bootlet/manifests"
)

// UserReviewer is who the apiserver says a client of rc is (a
// SelfSubjectReview).
type UserReviewer func(ctx context.Context, rc *rest.Config) (authenticationv1.UserInfo, error)

// ReviewUser is the apiserver's SelfSubjectReview of rc's credentials.
func ReviewUser(ctx context.Context, rc *rest.Config) (authenticationv1.UserInfo, error) {
	cs, err := kubeclient.New(rc, userAgent, 10*time.Second)
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return r.Status.UserInfo, nil
}

// kubeletHasOwnCertificate says why the kubelet of kubeconfig cannot do
// without its bootstrap kubeconfig yet ("" when it can), and who it is: the
// kubeconfig names a client certificate and key that load as a pair, the
// certificate is valid at now (the kubelet's own test before it falls back
// to the bootstrap kubeconfig), and the apiserver, reached as the
// kubeconfig says (its CA), authenticates it as a node.
func kubeletHasOwnCertificate(ctx context.Context, kubeconfig string, now time.Time, review UserReviewer) (who, why string) {
	if _, err := os.Stat(kubeconfig); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Sprintf("the kubelet has not written %s yet", kubeconfig)
		}
		return "", err.Error()
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err == nil {
		err = rest.LoadTLSFiles(rc)
	}
	if err != nil {
		return "", fmt.Sprintf("%s: %v", kubeconfig, err)
	}
	if len(rc.CertData) == 0 || len(rc.KeyData) == 0 || rc.BearerToken != "" || rc.BearerTokenFile != "" {
		return "", fmt.Sprintf("%s names no client certificate and key of the kubelet's own", kubeconfig)
	}
	pair, err := tls.X509KeyPair(rc.CertData, rc.KeyData)
	if err != nil {
		return "", fmt.Sprintf("the client certificate of %s: %v", kubeconfig, err)
	}
	cert := pair.Leaf
	switch {
	case now.Before(cert.NotBefore):
		return "", fmt.Sprintf("the client certificate of %s is not valid before %s", kubeconfig, cert.NotBefore.UTC().Format(time.RFC3339))
	case !now.Before(cert.NotAfter):
		return "", fmt.Sprintf("the client certificate of %s expired at %s", kubeconfig, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	u, err := review(ctx, rc)
	if err != nil {
		return "", fmt.Sprintf("the apiserver does not accept the client certificate of %s: %v", kubeconfig, err)
	}
	if !strings.HasPrefix(u.Username, "system:node:") || !slices.Contains(u.Groups, user.NodesGroup) {
		return "", fmt.Sprintf("the client certificate of %s authenticates as %q in %v, not as a node", kubeconfig, u.Username, u.Groups)
	}
	return fmt.Sprintf("%s (certificate valid until %s)", u.Username, cert.NotAfter.UTC().Format(time.RFC3339)), ""
}

// Finish removes out's bootstrap kubeconfig, the worker's copy of the
// token, once the kubelet holds a certificate of its own
// (kubeletHasOwnCertificate), as kubeadm join removes it after its
// kubelet's TLS bootstrap; it looks again every interval until timeout
// (once when timeout is 0), and keeps the file if the kubelet never does:
// without it, a kubelet without a valid certificate could not bootstrap.
func Finish(ctx context.Context, w io.Writer, out, kubeconfig string, timeout, interval time.Duration, review UserReviewer) error {
	bootstrapPath := filepath.Join(out, manifests.BootstrapKubeletKubeconfig)
	deadline := time.Now().Add(timeout)
	said := ""
	for {
		if _, err := os.Stat(bootstrapPath); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(w, "%s is gone already: no token on this node\n", bootstrapPath)
			return nil
		}
		who, why := kubeletHasOwnCertificate(ctx, kubeconfig, time.Now(), review)
		if why == "" {
			if err := os.Remove(bootstrapPath); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			// The removal survives a power cut that follows.
			if d, err := os.Open(out); err == nil {
				_ = d.Sync()
				d.Close()
			}
			fmt.Fprintf(w, "removed %s, the bootstrap token's copy on this node: the kubelet authenticates with its own certificate as %s\n", bootstrapPath, who)
			return nil
		}
		if !time.Now().Add(interval).Before(deadline) {
			return fmt.Errorf("kept %s: %s (after %s; start the kubelet, then run `bootlet join finish` again)", bootstrapPath, why, timeout)
		}
		if why != said {
			fmt.Fprintf(w, "waiting for the kubelet's TLS bootstrap: %s\n", why)
			said = why
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kept %s: %s: %w", bootstrapPath, why, ctx.Err())
		case <-time.After(interval):
		}
	}
}
