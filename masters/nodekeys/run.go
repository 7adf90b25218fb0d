package nodekeys

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/internal/kubeclient"
	"github.com/bootlet/bootlet/masters"
	"github.com/bootlet/bootlet/masters/signer"
)

// Config configures a Keeper.
type Config struct {
	// NodeName is this node's name in the API, and its kubelet identity's.
	NodeName string
	// Dir is the member's PKI directory (DefaultDir).
	Dir string
	// Kubeconfig is the node's own identity (a worker's kubelet.conf): the
	// signer issues only to system:node:NodeName. It may appear after Run
	// starts, and is reloaded when the kubelet renews it.
	Kubeconfig string
	// Client replaces Kubeconfig (tests).
	Client kubernetes.Interface
	// Interval between rounds (default 10 s).
	Interval time.Duration
	// Wait is how long one request waits for its verdict (default 2
	// minutes); Backoff how long the next waits after one that failed
	// (default 1 minute).
	Wait, Backoff time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// IdentityKubeconfig is where the checkpointer identity's kubeconfig
	// goes (DefaultIdentityKubeconfig); "-": the keeper keeps none.
	IdentityKubeconfig string
	// Cluster is the API server and CA the identity's kubeconfig names
	// (default ClusterOf(Kubeconfig): the node's own, as the kubelet
	// reaches the API).
	Cluster func() (server string, ca []byte, err error)
}

// DefaultDir is where a member's pod reads its certificates on a node
// (render's /etc/kubernetes/pki/etcd).
const DefaultDir = "/etc/kubernetes/pki/etcd"

// Keeper keeps this node's member certificate while the node is labelled.
// One goroutine runs it.
type Keeper struct {
	cfg Config
	// One request of each credential at a time, each with its own
	// backoff: the member's pair and the checkpointer identity.
	member, identity asking
}

// asking is one credential's state between rounds.
type asking struct {
	said    string
	retryAt time.Time
}

// New is a Keeper of cfg.
func New(cfg Config) *Keeper {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 2 * time.Minute
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.IdentityKubeconfig == "" {
		cfg.IdentityKubeconfig = DefaultIdentityKubeconfig
	}
	if cfg.Cluster == nil {
		path := cfg.Kubeconfig
		cfg.Cluster = func() (string, []byte, error) { return ClusterOf(path) }
	}
	return &Keeper{cfg: cfg}
}

// Run takes rounds until ctx ends.
func (k *Keeper) Run(ctx context.Context) {
	klog.InfoS("Master credentials keeper started", "node", k.cfg.NodeName, "etcdDir", k.cfg.Dir, "identity", k.cfg.IdentityKubeconfig)
	kubeclient.Run(ctx, k.cfg.Client, k.cfg.Kubeconfig, "bootlet-member-key", func(err error) {
		klog.V(4).InfoS("Kubeconfig not loadable yet", "path", k.cfg.Kubeconfig, "err", err)
	}, func(ctx context.Context, cs kubernetes.Interface) {
		kubeclient.Rounds(ctx, kubeclient.NewWake(), k.cfg.Interval, func() {
			if err := k.Round(ctx, cs); err != nil {
				klog.ErrorS(err, "Etcd member certificate", "node", k.cfg.NodeName)
			}
		})
	})
}

// Round reads the Node and the disk, decides for each credential, and
// asks when it must: it posts a request, waits for the certificate and
// writes it. A request that fails is tried again after Backoff.
func (k *Keeper) Round(ctx context.Context, cs kubernetes.Interface) error {
	n, err := cs.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", k.cfg.NodeName, err)
	}
	_, labelled := n.Labels[masters.Label]
	err = k.keepMember(ctx, cs, labelled, signer.NodeAddresses(n))
	if k.cfg.IdentityKubeconfig != "-" {
		err = errors.Join(err, k.keepIdentity(ctx, cs, labelled))
	}
	return err
}

// keepMember keeps the etcd member's pair in Dir.
func (k *Keeper) keepMember(ctx context.Context, cs kubernetes.Interface, labelled bool, addrs []netip.Addr) error {
	f := Facts{Node: k.cfg.NodeName, Labelled: labelled, Addresses: addrs, Now: k.cfg.Now()}
	var err error
	if f.Pair, err = Read(k.cfg.Dir); err != nil {
		f.PairError = err.Error()
	}
	d := Decide(f)
	if !k.member.due(d, f.Now, "Etcd member certificate", k.cfg.NodeName) {
		return nil
	}
	var caOnDisk *x509.Certificate
	if f.Pair != nil {
		caOnDisk = f.Pair.CA
	}
	if err := k.ask(ctx, cs, f.Addresses, caOnDisk); err != nil {
		return k.member.failed(k.cfg.Now(), k.cfg.Backoff, fmt.Errorf("asking for the etcd member certificate: %w", err))
	}
	// What was just written must satisfy Decide, or every round would
	// ask again: a node whose clock is more than the signer's backdate
	// behind the masters' reads its new certificate as not yet valid.
	f.Now = k.cfg.Now()
	if f.Pair, err = Read(k.cfg.Dir); err != nil {
		f.Pair, f.PairError = nil, err.Error()
	}
	if d := Decide(f); d.Ask {
		return k.member.failed(f.Now, k.cfg.Backoff, fmt.Errorf("the etcd member certificate just written does not do (is this node's clock behind the masters'?): %s", d.Why))
	}
	k.member.retryAt = time.Time{}
	return nil
}

// keepIdentity keeps the checkpointer identity's kubeconfig.
func (k *Keeper) keepIdentity(ctx context.Context, cs kubernetes.Interface, labelled bool) error {
	f := IdentityFacts{Labelled: labelled, Now: k.cfg.Now()}
	var err error
	if f.Cert, err = ReadIdentity(k.cfg.IdentityKubeconfig); err != nil {
		f.ReadError = err.Error()
	}
	d := DecideIdentity(f)
	if !k.identity.due(d, f.Now, "Checkpointer identity", k.cfg.NodeName) {
		return nil
	}
	if err := k.askIdentity(ctx, cs); err != nil {
		return k.identity.failed(k.cfg.Now(), k.cfg.Backoff, fmt.Errorf("asking for the checkpointer identity: %w", err))
	}
	f.Now = k.cfg.Now()
	if f.Cert, err = ReadIdentity(k.cfg.IdentityKubeconfig); err != nil {
		f.Cert, f.ReadError = nil, err.Error()
	}
	if d := DecideIdentity(f); d.Ask {
		return k.identity.failed(f.Now, k.cfg.Backoff, fmt.Errorf("the checkpointer identity just written does not do (is this node's clock behind the masters'?): %s", d.Why))
	}
	k.identity.retryAt = time.Time{}
	return nil
}

// due logs a decision that changed, and says whether to ask now: asked
// for, and not backing off.
func (a *asking) due(d Decision, now time.Time, what, node string) bool {
	if d.Why != a.said {
		klog.InfoS(what, "node", node, "ask", d.Ask, "why", d.Why)
		a.said = d.Why
	}
	return d.Ask && !now.Before(a.retryAt)
}

// failed backs off from now, the end of the ask, which may have waited
// longer than the backoff: a signer that does not answer gets one
// request per Wait+Backoff, not one per round.
func (a *asking) failed(now time.Time, backoff time.Duration, err error) error {
	a.retryAt = now.Add(backoff)
	return fmt.Errorf("%w (again after %s)", err, backoff)
}

// usages are what the signer requires, and the two every TLS key has.
var usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment,
	certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth}

// ask makes a key, posts the request (client-go's, as the kubelet posts
// its own), waits for the certificate and writes the pair.
func (k *Keeper) ask(ctx context.Context, cs kubernetes.Interface, addrs []netip.Addr, caOnDisk *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, signer.Template(k.cfg.NodeName, addrs), key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	reqPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	name, uid, err := csr.RequestCertificateWithContext(ctx, cs, reqPEM, "", signer.SignerName, nil, usages, key)
	if err != nil {
		return err
	}
	klog.InfoS("Etcd member certificate requested", "node", k.cfg.NodeName, "csr", name, "addresses", addrs)
	wctx, cancel := context.WithTimeout(ctx, k.cfg.Wait)
	defer cancel()
	chain, err := csr.WaitForCertificate(wctx, cs, name, uid)
	if err != nil {
		return fmt.Errorf("request %s: %w", name, err)
	}
	leaf, ca, err := Split(chain, caOnDisk)
	if err != nil {
		return fmt.Errorf("request %s: %w", name, err)
	}
	if err := forKey(leaf, key); err != nil {
		return fmt.Errorf("request %s: %w", name, err)
	}
	if err := Write(k.cfg.Dir, encode(leaf), encode(ca), pem.EncodeToMemory(&pem.Block{Type: keyutil.ECPrivateKeyBlockType, Bytes: keyDER})); err != nil {
		return fmt.Errorf("writing the pair of request %s: %w", name, err)
	}
	klog.InfoS("Etcd member certificate written", "node", k.cfg.NodeName, "csr", name, "dir", k.cfg.Dir)
	return nil
}

// forKey checks that the signer's certificate is a leaf of key, the one
// this request was made with: written beside a key it does not match,
// it would serve nothing, and Decide reads no keys.
func forKey(leaf *x509.Certificate, key *ecdsa.PrivateKey) error {
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(key.Public()) || leaf.IsCA {
		return fmt.Errorf("the signer's certificate for %q is not a leaf of the key this node asked with", leaf.Subject.CommonName)
	}
	return nil
}

// identityUsages are what the identity's request asks for: a client's.
var identityUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}

// askIdentity makes a key, posts the request for the checkpointer
// identity (the masters' leader approves it for a labelled node, the
// controller-manager signs), waits for the certificate and writes the
// kubeconfig.
func (k *Keeper) askIdentity(ctx context.Context, cs kubernetes.Interface) error {
	server, ca, err := k.cfg.Cluster()
	if err != nil {
		return fmt.Errorf("the cluster to name: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, signer.IdentityTemplate(), key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	life := IdentityLife
	reqPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	name, uid, err := csr.RequestCertificateWithContext(ctx, cs, reqPEM, "", signer.IdentitySignerName, &life, identityUsages, key)
	if err != nil {
		return err
	}
	klog.InfoS("Checkpointer identity requested", "node", k.cfg.NodeName, "csr", name)
	wctx, cancel := context.WithTimeout(ctx, k.cfg.Wait)
	defer cancel()
	chain, err := csr.WaitForCertificate(wctx, cs, name, uid)
	if err != nil {
		return fmt.Errorf("request %s: %w", name, err)
	}
	certs, err := certutil.ParseCertsPEM(chain)
	if err != nil {
		return fmt.Errorf("request %s: %w", name, err)
	}
	if err := forKey(certs[0], key); err != nil {
		return fmt.Errorf("request %s: %w", name, err)
	}
	if err := WriteIdentity(k.cfg.IdentityKubeconfig, server, ca, encode(certs[0]), pem.EncodeToMemory(&pem.Block{Type: keyutil.ECPrivateKeyBlockType, Bytes: keyDER})); err != nil {
		return fmt.Errorf("writing the identity of request %s: %w", name, err)
	}
	klog.InfoS("Checkpointer identity written", "node", k.cfg.NodeName, "csr", name, "kubeconfig", k.cfg.IdentityKubeconfig)
	return nil
}
