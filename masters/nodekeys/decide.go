package nodekeys

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"
)

// renewAt is the share of a certificate's life after which a labelled
// node asks for a new one: the kubelet rotates its own between 70% and
// 90% of the life; this is its middle, without the jitter, which one
// node's single request does not need.
const renewAt = 0.8

// Pair is the member's certificate on disk, as Read found it.
type Pair struct {
	// Leaf is the first certificate of server.crt.
	Leaf *x509.Certificate
	// CA is ca.crt's first certificate.
	CA *x509.Certificate
}

// Facts are what one decision reads.
type Facts struct {
	// Node is the node's name: the certificate's CN.
	Node string
	// Labelled is whether the Node carries the masters' label.
	Labelled bool
	// Addresses are the Node's status addresses that are IPs.
	Addresses []netip.Addr
	// Pair is what is on disk; nil when there is none, or when it does
	// not read (then PairError says why).
	Pair      *Pair
	PairError string
	Now       time.Time
}

// Decision is Decide's answer: Ask says whether to request a new
// certificate, and Why says why or why not, for a person.
type Decision struct {
	Ask bool
	Why string
}

// Decide whether the node asks for its member certificate. An
// unlabelled node never asks (the signer would deny it), and keeps what
// it has; a labelled node asks while it has no pair that the CA verifies
// for its name and every address it reports, within renewAt of its life.
func Decide(f Facts) Decision {
	switch {
	case !f.Labelled:
		return Decision{Why: "the Node is not labelled a master"}
	case len(f.Addresses) == 0:
		// The signer denies a certificate that names none of the
		// Node's addresses: its peers could not verify it.
		return Decision{Why: "the Node reports no IP address yet"}
	case f.Pair == nil && f.PairError != "":
		return ask("the member certificate on disk does not read: %s", f.PairError)
	case f.Pair == nil:
		return ask("no member certificate on disk")
	}
	leaf, ca := f.Pair.Leaf, f.Pair.CA
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return ask("the member certificate on disk is not for both server and client auth (a member serves its peers and is their client)")
	}
	if why := verify(leaf, ca, f.Now); why != "" {
		return ask("the member certificate on disk %s", why)
	}
	if leaf.Subject.CommonName != f.Node {
		return ask("the member certificate on disk is %q's, not %q's", leaf.Subject.CommonName, f.Node)
	}
	for _, a := range f.Addresses {
		if !slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool {
			got, ok := netip.AddrFromSlice(ip)
			return ok && got.Unmap() == a
		}) {
			return ask("the member certificate on disk does not name the Node's address %s", a)
		}
	}
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	if renew := leaf.NotBefore.Add(time.Duration(float64(life) * renewAt)); !f.Now.Before(renew) {
		return ask("the member certificate on disk expires at %s (renewed from %s)", leaf.NotAfter.UTC().Format(time.RFC3339), renew.UTC().Format(time.RFC3339))
	}
	return Decision{Why: fmt.Sprintf("the member certificate on disk is good until %s", leaf.NotAfter.UTC().Format(time.RFC3339))}
}

func ask(format string, args ...any) Decision {
	return Decision{Ask: true, Why: fmt.Sprintf(format, args...)}
}

// verify says what is wrong with leaf as an etcd member's certificate of
// ca at now, or "".
func verify(leaf, ca *x509.Certificate, now time.Time) string {
	if ca == nil {
		return "has no CA beside it"
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return fmt.Sprintf("does not verify with its CA: %v", err)
	}
	return ""
}
