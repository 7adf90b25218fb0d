package signer

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/internal/kubeclient"
	"github.com/bootlet/bootlet/masters"
	btypes "github.com/bootlet/bootlet/types"
)

// Config configures the signer.
type Config struct {
	// EtcdCA returns the etcd CA's certificate and key files on this
	// master (its member's pod names them).
	EtcdCA func() (certFile, keyFile string, err error)
	// Resync is the period of a full round besides the watch's events
	// (default 30 s).
	Resync time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Signer writes the verdicts on SignerName's requests.
type Signer struct{ cfg Config }

// New is a signer of cfg.
func New(cfg Config) *Signer {
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Signer{cfg: cfg}
}

// Lead decides the requests until ctx ends (the Lease lost): the masters'
// leader runs it (upgrade/controller's AlsoLeading), so one master writes.
func (s *Signer) Lead(ctx context.Context, cs kubernetes.Interface, _ dynamic.Interface) {
	// Every request, not a field selector on one signer: two signers'
	// requests are decided here (a selector takes one value), and
	// requests are few.
	factory := informers.NewSharedInformerFactory(cs, 0)
	csrs := factory.Certificates().V1().CertificateSigningRequests()
	nodes := factory.Core().V1().Nodes()
	poke := kubeclient.NewWake()
	wake := poke.Poke
	if _, err := csrs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: wake, UpdateFunc: func(_, n any) { wake(n) }}); err != nil {
		klog.ErrorS(err, "Etcd member signer: cannot watch requests")
		return
	}
	// A Node labelled or registered may let a waiting request through.
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: wake, UpdateFunc: func(_, n any) { wake(n) }}); err != nil {
		klog.ErrorS(err, "Etcd member signer: cannot watch nodes")
		return
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), csrs.Informer().HasSynced, nodes.Informer().HasSynced) {
		return
	}
	klog.InfoS("Etcd member signer: leading", "signers", []string{SignerName, IdentitySignerName + " (" + btypes.CheckpointerUser + ")"})
	said := map[string]string{}
	kubeclient.Rounds(ctx, poke, s.cfg.Resync, func() {
		s.keepEtcdCAPublished(ctx, cs, said)
		s.round(ctx, cs, csrs.Lister(), said)
	})
}

// keepEtcdCAPublished keeps the etcd CA's credential Secret in line with
// the CA this leader signs with (publishEtcdCA), saying so once per
// change or error.
func (s *Signer) keepEtcdCAPublished(ctx context.Context, cs kubernetes.Interface, said map[string]string) {
	const key = "secret/" + EtcdCASecretName
	wrote, err := s.publishEtcdCA(ctx, cs)
	switch {
	case err != nil:
		if said[key] != err.Error() {
			klog.ErrorS(err, "Etcd member signer: the etcd CA is not published for the other masters; a node labelled a master cannot lead until it is", "secret", metav1.NamespaceSystem+"/"+EtcdCASecretName)
			said[key] = err.Error()
		}
	case wrote:
		klog.InfoS("Etcd member signer: published the etcd CA for every master's credential mirror", "secret", metav1.NamespaceSystem+"/"+EtcdCASecretName)
		delete(said, key)
	default:
		delete(said, key)
	}
}

// round writes a verdict on every request of SignerName not finished,
// and on every node's request for the checkpointer identity not yet
// approved (IsIdentityRequest).
func (s *Signer) round(ctx context.Context, cs kubernetes.Interface, csrs certlisters.CertificateSigningRequestLister, said map[string]string) {
	all, err := csrs.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Etcd member signer: listing requests")
		return
	}
	for _, r := range all {
		decide, sign := Decide, true
		switch req := RequestOf(r); {
		case finished(r):
			continue
		case r.Spec.SignerName == SignerName:
		case IsIdentityRequest(r.Spec.SignerName, req) && !approved(r):
			// Approved is done here: the controller-manager signs.
			decide, sign = DecideIdentity, false
		default:
			continue
		}
		// The Node as the apiserver has it now, not as the informer
		// last saw it: a verdict is final, and a label that reached the
		// cache late would deny a master its member (the informer only
		// wakes the round). Requests are few; a read each costs nothing.
		var nodeErr error
		v := decide(RequestOf(r), func(name string) NodeFacts {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return NodeFacts{}
			case err != nil:
				nodeErr = err
				return NodeFacts{}
			}
			return nodeFacts(n)
		})
		if nodeErr != nil {
			klog.ErrorS(nodeErr, "Etcd member signer: reading the requester's Node", "csr", r.Name)
			continue
		}
		if v.Kind == Wait {
			if said[r.Name] != v.Message {
				klog.InfoS("Etcd member signer: waiting", "csr", r.Name, "requester", r.Spec.Username, "why", v.Message)
				said[r.Name] = v.Message
			}
			continue
		}
		if err := s.write(ctx, cs, r, v, sign); err != nil {
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				klog.ErrorS(err, "Etcd member signer: writing the verdict", "csr", r.Name, "reason", v.Reason)
			}
			continue
		}
		delete(said, r.Name)
		klog.InfoS("Etcd member signer: decided", "csr", r.Name, "requester", r.Spec.Username, "issued", v.Kind == Issue, "reason", v.Reason, "message", v.Message)
	}
}

// finished: denied, failed, or its certificate issued.
func finished(r *certificatesv1.CertificateSigningRequest) bool {
	if len(r.Status.Certificate) > 0 {
		return true
	}
	for _, c := range r.Status.Conditions {
		if c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
			return true
		}
	}
	return false
}

func approved(r *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range r.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// RequestOf is what Decide reads of r: its spec as the apiserver set it
// (the requester's identity cannot be forged), and its request parsed with
// the signature checked.
func RequestOf(r *certificatesv1.CertificateSigningRequest) Request {
	out := Request{Username: r.Spec.Username, Groups: r.Spec.Groups, Usages: r.Spec.Usages, ExpirationSeconds: r.Spec.ExpirationSeconds}
	csr, err := parseCSR(r.Spec.Request)
	if err != nil {
		out.ParseError = err.Error()
		return out
	}
	out.CSR = csr
	return out
}

func parseCSR(pemData []byte) (*x509.CertificateRequest, error) {
	blk, _ := pem.Decode(pemData)
	if blk == nil || blk.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("no PEM block of type CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(blk.Bytes)
	if err != nil {
		return nil, err
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("its signature: %w", err)
	}
	return csr, nil
}

func nodeFacts(n *v1.Node) NodeFacts {
	_, labelled := n.Labels[masters.Label]
	return NodeFacts{Found: true, Labelled: labelled, Addresses: NodeAddresses(n)}
}

// NodeAddresses are the Node's addresses a request's IPs are checked
// against: its InternalIPs and ExternalIPs. A node asks for these
// (masters/nodekeys), so the two read them alike.
func NodeAddresses(n *v1.Node) []netip.Addr {
	var addrs []string
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP || a.Type == v1.NodeExternalIP {
			addrs = append(addrs, a.Address)
		}
	}
	return ipAddrs(addrs)
}

// write approves and, with sign, signs (Issue), or denies: the approval
// through its subresource, then the certificate through the status. A
// request approved but not signed (the leader lost between the two
// writes, or a signing that failed) is signed at the next round.
func (s *Signer) write(ctx context.Context, cs kubernetes.Interface, r *certificatesv1.CertificateSigningRequest, v Verdict, sign bool) error {
	api := cs.CertificatesV1().CertificateSigningRequests()
	if v.Kind == Deny || !approved(r) {
		typ := certificatesv1.CertificateApproved
		if v.Kind == Deny {
			typ = certificatesv1.CertificateDenied
		}
		r = r.DeepCopy()
		r.Status.Conditions = append(r.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: typ, Status: v1.ConditionTrue, Reason: v.Reason, Message: v.Message, LastUpdateTime: metav1.Now(),
		})
		var err error
		if r, err = api.UpdateApproval(ctx, r.Name, r, metav1.UpdateOptions{}); err != nil || v.Kind == Deny || !sign {
			return err
		}
	}
	cert, err := s.issue(r)
	r = r.DeepCopy()
	if err != nil {
		// The CA could not sign: say so on the request, which the node
		// then sees as failed, rather than leave it waiting.
		r.Status.Conditions = append(r.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateFailed, Status: v1.ConditionTrue, Reason: "SigningFailed", Message: err.Error(), LastUpdateTime: metav1.Now(),
		})
	} else {
		r.Status.Certificate = cert
	}
	_, uerr := api.UpdateStatus(ctx, r, metav1.UpdateOptions{})
	if uerr == nil && err != nil {
		return fmt.Errorf("signing: %w", err)
	}
	return uerr
}

// issue signs the request with the etcd CA on this master's disk, for the
// life the request asks for (its expirationSeconds), at most
// DefaultValidity, and returns the certificate followed by the CA's.
func (s *Signer) issue(r *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	csr, err := parseCSR(r.Spec.Request)
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := s.cfg.EtcdCA()
	if err != nil {
		return nil, fmt.Errorf("finding the etcd CA: %w", err)
	}
	ca, key, err := readCA(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	validity := DefaultValidity
	if e := r.Spec.ExpirationSeconds; e != nil && time.Duration(*e)*time.Second < validity {
		validity = time.Duration(*e) * time.Second
	}
	leaf, err := IssueCertificate(csr, ca, key, validity, s.cfg.Now())
	if err != nil {
		return nil, err
	}
	// The CA after the certificate: the node needs it to verify its
	// peers, and it arrives over the same authenticated channel as the
	// certificate (masters/nodekeys reads it there).
	return append(leaf, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})...), nil
}

func readCA(certFile, keyFile string) (*x509.Certificate, crypto.Signer, error) {
	certs, err := certutil.CertsFromFile(certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("the etcd CA's certificate: %w", err)
	}
	data, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("the etcd CA's key: %w", err)
	}
	k, err := keyutil.ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, nil, fmt.Errorf("the etcd CA's key %s: %w", keyFile, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("the etcd CA's key %s is not a signing key", keyFile)
	}
	// During a CA rotation the file holds two CAs: sign with the key's.
	for _, c := range certs {
		if pub, ok := c.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && pub.Equal(signer.Public()) {
			return c, signer, nil
		}
	}
	return nil, nil, fmt.Errorf("no certificate of %s is the key %s's", certFile, keyFile)
}
