package signer

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/bootlet/bootlet/masters"
	btypes "github.com/bootlet/bootlet/types"
)

// IdentitySignerName is the signer of the checkpointer identity's client
// certificate: the apiserver's own client signer, which the
// controller-manager signs with the cluster CA (--cluster-signing-*). This
// package only approves or denies; it never holds the cluster CA's key.
const IdentitySignerName = certificatesv1.KubeAPIServerClientSignerName

// MaxIdentityLife is the longest life of a checkpointer identity the
// signer approves (masters/nodekeys asks for this much).
const MaxIdentityLife = 30 * 24 * time.Hour

// IsIdentityRequest: r is a node's request for the checkpointer identity
// (btypes.CheckpointerUser), the one kind of request of
// IdentitySignerName this package decides. Every other request of that
// signer (a person's, a tool's) is left to whoever decides it.
func IsIdentityRequest(signerName string, r Request) bool {
	if signerName != IdentitySignerName || !strings.HasPrefix(r.Username, nodeUserPrefix) {
		return false
	}
	return r.CSR == nil || r.CSR.Subject.CommonName == btypes.CheckpointerUser
}

// identityUsages are what a client certificate is for; the first is
// required, the others what every TLS key has.
var (
	identityRequired = []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}
	identityOptional = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment}
)

// DecideIdentity is the verdict on a node's request for the
// checkpointer identity (IsIdentityRequest): the identity of a master's
// bootlet (its checkpointer, serving gate and credential mirror), which
// reads kube-system's Secrets. A labelled node's own kubelet identity gets
// it, for CN=btypes.CheckpointerUser alone: no organization (an O is a
// group, and O=system:masters would be cluster-admin), no other name.
// Issue here means approve: the controller-manager signs.
func DecideIdentity(r Request, node func(name string) NodeFacts) Verdict {
	name, refused := fromANode(r, "the checkpointer identity", identityRequired, identityOptional)
	if refused != nil {
		return *refused
	}
	// The controller-manager signs for the life asked, else for its
	// default (a year): only the request can keep a demoted node's
	// identity short.
	if e := r.ExpirationSeconds; e == nil || time.Duration(*e)*time.Second > MaxIdentityLife {
		return deny("Expiration", "the identity must ask for a life (expirationSeconds) of at most %s: a demoted node keeps it until it lapses", MaxIdentityLife)
	}
	subj := r.CSR.Subject
	if subj.CommonName != btypes.CheckpointerUser || len(subj.Organization) > 0 || len(subj.OrganizationalUnit) > 0 {
		return deny("Subject", "the subject must be CN=%s and nothing else (an organization is a group), not %q", btypes.CheckpointerUser, subj.String())
	}
	if len(r.CSR.DNSNames) > 0 || len(r.CSR.IPAddresses) > 0 || len(r.CSR.URIs) > 0 || len(r.CSR.EmailAddresses) > 0 {
		return deny("SubjectAltNames", "a client identity names no DNS name, IP, URI or e-mail address")
	}
	n := node(name)
	if !n.Found {
		return Verdict{Kind: Wait, Reason: "NodeNotFound", Message: fmt.Sprintf("node %s is not registered (yet)", name)}
	}
	if !n.Labelled {
		return deny("NotAMaster", "node %s is not labelled %s: only an administrator's label makes a node a master", name, masters.Label)
	}
	return Verdict{Kind: Issue, Reason: "CheckpointerOfMaster", Message: fmt.Sprintf("node %s is labelled %s; the certificate is %s's and names nothing else", name, masters.Label, btypes.CheckpointerUser)}
}

// IdentityTemplate is the request a node makes for the checkpointer
// identity: its CN alone. DecideIdentity approves it for a labelled node.
func IdentityTemplate() *x509.CertificateRequest {
	return &x509.CertificateRequest{Subject: pkix.Name{CommonName: btypes.CheckpointerUser}}
}
