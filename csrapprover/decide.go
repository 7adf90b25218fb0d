package csrapprover

import (
	"crypto/x509"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/kubernetes/pkg/apis/certificates"
	certificatesv1helpers "k8s.io/kubernetes/pkg/apis/certificates/v1"
)

// Verdict is what the controller does with a request.
type Verdict int

const (
	// Ignore leaves the request to others (not a bootstrap token's node
	// client request, or already decided).
	Ignore Verdict = iota
	Approve
	Deny
)

func (v Verdict) String() string {
	switch v {
	case Approve:
		return "Approve"
	case Deny:
		return "Deny"
	}
	return "Ignore"
}

// Reasons of the approval conditions this controller writes.
const (
	ReasonApproved        = "BootletAutoApproved"
	ReasonNotNodeClient   = "NotANodeClientRequest"
	ReasonNodeExists      = "NodeNameInUse"
	ReasonNodeNameClaimed = "NodeNameClaimed"
	ReasonInvalidName     = "InvalidNodeName"
)

// Decision is Decide's answer; Reason and Message go into the condition.
type Decision struct {
	Verdict Verdict
	Reason  string
	Message string
	// NodeName is the name the request asks for ("" when not parsed).
	NodeName string
}

// Facts are what the verdict depends on besides the request.
type Facts struct {
	// BootstrapGroup is the token group whose requests this controller
	// decides (render's manifests.NodeBootstrapTokenGroup).
	BootstrapGroup string
	// NodeExists says whether a Node of that name exists.
	NodeExists func(name string) bool
	// ClaimedBy names another request (not this one) already approved for
	// a bootstrap requester for that node name, "" if none. Between the
	// approval and the Node's registration, a second token holder must not
	// get the same identity.
	ClaimedBy func(nodeName, exceptCSR string) string
}

const nodeUserPrefix = "system:node:"

// Decide is the verdict on csr. Pure.
func Decide(csr *certificatesv1.CertificateSigningRequest, f Facts) Decision {
	if decided(csr) {
		return Decision{Verdict: Ignore}
	}
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		return Decision{Verdict: Ignore}
	}
	if !sets.New(csr.Spec.Groups...).Has(f.BootstrapGroup) {
		return Decision{Verdict: Ignore}
	}
	req, err := certificatesv1helpers.ParseCSR(csr.Spec.Request)
	if err != nil {
		return deny(ReasonNotNodeClient, "", "the request does not parse: %v", err)
	}
	if err := validateNodeClient(req, csr.Spec.Usages); err != nil {
		return deny(ReasonNotNodeClient, "", "a bootstrap token may only ask for a node client certificate: %v", err)
	}
	name := strings.TrimPrefix(req.Subject.CommonName, nodeUserPrefix)
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return deny(ReasonInvalidName, name, "node name %q is not valid: %s", name, strings.Join(errs, "; "))
	}
	if f.NodeExists(name) {
		return deny(ReasonNodeExists, name,
			"a Node named %q exists: a bootstrap token cannot take an existing node's identity (a reinstalled machine joins once its old Node object is deleted)", name)
	}
	if other := f.ClaimedBy(name, csr.Name); other != "" {
		return deny(ReasonNodeNameClaimed, name,
			"request %s was already approved for node %q, which has not registered yet: one identity is issued once", other, name)
	}
	return Decision{Verdict: Approve, Reason: ReasonApproved, NodeName: name,
		Message: fmt.Sprintf("bootlet approved the bootstrap client certificate of new node %q", name)}
}

func deny(reason, name, format string, args ...any) Decision {
	return Decision{Verdict: Deny, Reason: reason, NodeName: name, Message: fmt.Sprintf(format, args...)}
}

// validateNodeClient is the apiserver's own rule for a kubelet client
// request (O=system:nodes, CN system:node:*, no SAN, client usages).
func validateNodeClient(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	u := sets.NewString()
	for _, k := range usages {
		u.Insert(string(k))
	}
	return certificates.ValidateKubeletClientCSR(req, u)
}

// decided says whether the request already carries a verdict.
func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return true
		}
	}
	return false
}

// NodeNameOf is the node name a bootstrap requester's approved request was
// for ("" when it is not one): the facts of ClaimedBy.
func NodeNameOf(csr *certificatesv1.CertificateSigningRequest, bootstrapGroup string) string {
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || !sets.New(csr.Spec.Groups...).Has(bootstrapGroup) {
		return ""
	}
	approved := false
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved {
			approved = true
		}
	}
	if !approved {
		return ""
	}
	req, err := certificatesv1helpers.ParseCSR(csr.Spec.Request)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(req.Subject.CommonName, nodeUserPrefix)
}
