package nodekeys

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/masters/signer"
	btypes "github.com/bootlet/bootlet/types"
)

// DefaultIdentityKubeconfig is where a master's bootlet reads the
// checkpointer identity (its --checkpointer-kubeconfig): render writes it
// there on a first-boot master, and the keeper on a labelled node.
const DefaultIdentityKubeconfig = "/etc/kubernetes/bootlet-checkpointer.conf"

// IdentityLife is the life the keeper asks for: a month, renewed at
// renewAt, so a demoted node's identity lapses within a month of its
// demotion. A first-boot master's, which render writes, lives as render's
// other leaves do.
const IdentityLife = signer.MaxIdentityLife

// IdentityFacts are what one decision on the checkpointer identity reads.
type IdentityFacts struct {
	Labelled bool
	// Cert is the identity's client certificate on disk; nil when there
	// is none, or when it does not read (then ReadError says why).
	Cert      *x509.Certificate
	ReadError string
	Now       time.Time
}

// DecideIdentity whether the node asks for the checkpointer identity: a
// labelled node asks while it has no certificate of that name for client
// auth before renewAt of its life. Which CA signed it is the apiserver's
// to judge: the keeper checks only what it asked for.
func DecideIdentity(f IdentityFacts) Decision {
	switch {
	case !f.Labelled:
		return Decision{Why: "the Node is not labelled a master"}
	case f.Cert == nil && f.ReadError != "":
		return ask("the checkpointer identity on disk does not read: %s", f.ReadError)
	case f.Cert == nil:
		return ask("no checkpointer identity on disk")
	}
	c := f.Cert
	switch {
	case c.Subject.CommonName != btypes.CheckpointerUser || len(c.Subject.Organization) > 0:
		return ask("the identity on disk is %q, not %s's", c.Subject.String(), btypes.CheckpointerUser)
	case !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth):
		return ask("the identity on disk is not for client auth")
	case f.Now.Before(c.NotBefore) || !f.Now.Before(c.NotAfter):
		return ask("the identity on disk is valid from %s to %s only", c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
	}
	life := c.NotAfter.Sub(c.NotBefore)
	if renew := c.NotBefore.Add(time.Duration(float64(life) * renewAt)); !f.Now.Before(renew) {
		return ask("the identity on disk expires at %s (renewed from %s)", c.NotAfter.UTC().Format(time.RFC3339), renew.UTC().Format(time.RFC3339))
	}
	return Decision{Why: fmt.Sprintf("the checkpointer identity on disk is good until %s", c.NotAfter.UTC().Format(time.RFC3339))}
}

// ReadIdentity is the client certificate of the kubeconfig at path,
// checked to load with its key; (nil, nil) when there is no file.
func ReadIdentity(path string) (*x509.Certificate, error) {
	kc, err := clientcmd.LoadFromFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ctx, ok := kc.Contexts[kc.CurrentContext]
	if !ok {
		return nil, fmt.Errorf("%s: no current context", path)
	}
	auth, ok := kc.AuthInfos[ctx.AuthInfo]
	if !ok || len(auth.ClientCertificateData) == 0 || len(auth.ClientKeyData) == 0 {
		return nil, fmt.Errorf("%s: the current context's user holds no client certificate and key", path)
	}
	pair, err := tls.X509KeyPair(auth.ClientCertificateData, auth.ClientKeyData)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return x509.ParseCertificate(pair.Certificate[0])
}

// ClusterOf is the current cluster of the kubeconfig at path: its server
// and CA, which the identity's kubeconfig copies.
func ClusterOf(path string) (server string, ca []byte, err error) {
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return "", nil, err
	}
	ctx, ok := kc.Contexts[kc.CurrentContext]
	if !ok {
		return "", nil, fmt.Errorf("%s: no current context", path)
	}
	cl, ok := kc.Clusters[ctx.Cluster]
	if !ok || cl.Server == "" {
		return "", nil, fmt.Errorf("%s: the current context names no cluster with a server", path)
	}
	ca = cl.CertificateAuthorityData
	if len(ca) == 0 && cl.CertificateAuthority != "" {
		if ca, err = os.ReadFile(cl.CertificateAuthority); err != nil {
			return "", nil, err
		}
	}
	if len(ca) == 0 {
		return "", nil, fmt.Errorf("%s: the cluster names no CA", path)
	}
	return cl.Server, ca, nil
}

// WriteIdentity writes the identity's kubeconfig to path (mode 0600,
// through a rename): the cluster's server and CA, the certificate and its
// key embedded, as render writes a first-boot master's.
func WriteIdentity(path, server string, ca, certPEM, keyPEM []byte) error {
	return WriteKubeconfig(path, btypes.CheckpointerUser, server, ca, certPEM, keyPEM)
}

// WriteKubeconfig writes user's kubeconfig to path as WriteIdentity does.
func WriteKubeconfig(path, user, server string, ca, certPEM, keyPEM []byte) error {
	const cluster = "kubernetes"
	context := user + "@" + cluster
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{cluster: {Server: server, CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{user: {ClientCertificateData: certPEM, ClientKeyData: keyPEM}},
		Contexts:       map[string]*clientcmdapi.Context{context: {Cluster: cluster, AuthInfo: user}},
		CurrentContext: context,
	}
	data, err := clientcmd.Write(kc)
	if err != nil {
		return err
	}
	_, err = checkpoint.WriteFileAtomic(path, data)
	return err
}
