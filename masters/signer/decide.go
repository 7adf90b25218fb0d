package signer

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/bootlet/bootlet/masters"
)

// SignerName is the signer of an etcd member's certificate, which serves
// both its clients and its peers (server and client auth, as kubeadm's
// etcd server and peer certificates).
const SignerName = "bootlet.dev/etcd-member"

// nodeUserPrefix and nodesGroup are the kubelet identity's (the Node
// authorizer's).
const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
)

// Request is what a verdict reads of a CertificateSigningRequest.
type Request struct {
	Username string
	Groups   []string
	Usages   []certificatesv1.KeyUsage
	// ExpirationSeconds is the life the request asks for (nil: the
	// signer's default).
	ExpirationSeconds *int32
	// CSR is the parsed request; nil with ParseError when it did not parse
	// or its signature does not verify.
	CSR        *x509.CertificateRequest
	ParseError string
}

// NodeFacts are the requester's Node as the apiserver has it.
type NodeFacts struct {
	Found    bool
	Labelled bool
	// Addresses are its status addresses that are IPs.
	Addresses []netip.Addr
}

// VerdictKind is what becomes of a request.
type VerdictKind int

const (
	// Wait: nothing yet (its Node is not registered yet).
	Wait VerdictKind = iota
	// Deny: the request is denied with Reason and Message.
	Deny
	// Issue: approved and signed.
	Issue
)

// Verdict is Decide's answer.
type Verdict struct {
	Kind    VerdictKind
	Reason  string
	Message string
}

// allowedUsages are what an etcd member's certificate is for; the first
// two are what every TLS key needs, and may be left out.
var (
	requiredUsages = []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth}
	optionalUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment}
)

// Decide is the verdict on a request of SignerName. node reads the
// requester's Node by name. Every check that does not need the Node comes
// first, so a malformed request is denied even from a node that is gone.
func Decide(r Request, node func(name string) NodeFacts) Verdict {
	name, refused := fromANode(r, "an etcd member certificate", requiredUsages, optionalUsages)
	if refused != nil {
		return *refused
	}
	subj := r.CSR.Subject
	if subj.CommonName != name || len(subj.Organization) > 0 || len(subj.OrganizationalUnit) > 0 {
		return deny("Subject", "the subject must be CN=%s and nothing else (the member's name is its node's), not %q", name, subj.String())
	}
	if len(r.CSR.URIs) > 0 || len(r.CSR.EmailAddresses) > 0 {
		return deny("SubjectAltNames", "an etcd member's certificate names DNS names and IPs only")
	}
	for _, d := range r.CSR.DNSNames {
		if d != name && d != "localhost" {
			return deny("SubjectAltNames", "DNS name %q is neither the node's name %q nor localhost", d, name)
		}
	}
	n := node(name)
	if !n.Found {
		return Verdict{Kind: Wait, Reason: "NodeNotFound", Message: fmt.Sprintf("node %s is not registered (yet)", name)}
	}
	if !n.Labelled {
		return deny("NotAMaster", "node %s is not labelled %s: only an administrator's label makes a node a master", name, masters.Label)
	}
	own := false
	for _, ip := range r.CSR.IPAddresses {
		a, ok := netip.AddrFromSlice(ip)
		a = a.Unmap()
		switch {
		case !ok:
			return deny("SubjectAltNames", "IP %v does not parse", ip)
		case slices.Contains(n.Addresses, a):
			// Before the loopback rule: a node whose reported address
			// is a loopback (every node of a one-machine test) names
			// its own address with it.
			own = true
		case a.IsLoopback():
		default:
			return deny("SubjectAltNames", "IP %s is not one of node %s's addresses %v, nor a loopback", a, name, n.Addresses)
		}
	}
	if !own {
		return deny("SubjectAltNames", "the certificate names none of node %s's addresses %v: its peers could not verify it", name, n.Addresses)
	}
	return Verdict{Kind: Issue, Reason: "EtcdMemberOfMaster", Message: fmt.Sprintf("node %s is labelled %s; the certificate names only it", name, masters.Label)}
}

// fromANode is the checks every request decided here begins with: its
// requester is a node's own kubelet identity (whose name it returns), it
// parses, and it asks for required usages and optional ones only; the
// denial otherwise. what names the credential, for the message.
func fromANode(r Request, what string, required, optional []certificatesv1.KeyUsage) (string, *Verdict) {
	name, ok := strings.CutPrefix(r.Username, nodeUserPrefix)
	var v Verdict
	switch {
	case !ok || name == "" || !slices.Contains(r.Groups, nodesGroup):
		v = deny("NotANode", "only a node's own kubelet identity (%s<name> in %s) may ask for %s, not %q", nodeUserPrefix, nodesGroup, what, r.Username)
	case r.CSR == nil:
		v = deny("Malformed", "the request does not parse: %s", r.ParseError)
	default:
		why := usagesWithin(r.Usages, required, optional)
		if why == "" {
			return name, nil
		}
		v = deny("Usages", "%s", why)
	}
	return "", &v
}

// usagesWithin says what is wrong with us: a required usage missing, or
// one neither required nor optional; "" when nothing is.
func usagesWithin(us, required, optional []certificatesv1.KeyUsage) string {
	for _, req := range required {
		if !slices.Contains(us, req) {
			return fmt.Sprintf("the usages %v lack %q", us, req)
		}
	}
	for _, u := range us {
		if !slices.Contains(required, u) && !slices.Contains(optional, u) {
			return fmt.Sprintf("usage %q is not one this certificate needs (%v, and optionally %v)", u, required, optional)
		}
	}
	return ""
}

func deny(reason, format string, args ...any) Verdict {
	return Verdict{Kind: Deny, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// ipAddrs are a Node's status addresses that are IPs.
func ipAddrs(addrs []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range addrs {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// loopbacks are the IPs every member's certificate also names (kubeadm's
// etcd SANs), so that clients on the node verify it over loopback.
var loopbacks = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
