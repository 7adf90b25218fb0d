package podapi

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/podapi/authn"
)

// DefaultMaxMintValidity caps the lifetime of a client certificate minted
// by /bootlet/v1/kubeconfig (--kubeconfig-max-validity). bootlet keeps no
// revocation list: a leaked certificate works until it expires, so a short
// cap bounds the damage; a provisioning system asks again.
const DefaultMaxMintValidity = 24 * time.Hour

// kubeconfigRequestKind names the request in a 422 Status.
var kubeconfigRequestKind = schema.GroupKind{Group: "bootlet.dev", Kind: "KubeconfigRequest"}

// mintValidity parses the requested validity: empty is the cap; more than
// the cap is a 422 naming the field, so the caller knows it got less than
// it asked for rather than finding out at expiry.
func (s *Server) mintValidity(user, v string) (time.Duration, error) {
	max := s.MaxMintValidity
	if max <= 0 {
		max = DefaultMaxMintValidity
	}
	if v == "" {
		return max, nil
	}
	d, err := time.ParseDuration(v)
	var errs field.ErrorList
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(field.NewPath("validity"), v, "must be a duration such as 24h"))
	case d <= 0:
		errs = append(errs, field.Invalid(field.NewPath("validity"), v, "must be positive"))
	case d > max:
		errs = append(errs, field.Invalid(field.NewPath("validity"), v, fmt.Sprintf("must be at most %s (the daemon's --kubeconfig-max-validity)", max)))
	}
	if len(errs) > 0 {
		return 0, apierrors.NewInvalid(kubeconfigRequestKind, user, errs)
	}
	return d, nil
}

// auditMint records a minted client certificate: a log line and a node
// Event, naming the peer that asked, the identity it got and until when.
func (s *Server) auditMint(req *http.Request, user string, groups []string, validity time.Duration, certPEM []byte) {
	serial, notAfter := "", time.Now().Add(validity).UTC()
	if b, _ := pem.Decode(certPEM); b != nil {
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			serial, notAfter = c.SerialNumber.Text(16), c.NotAfter
		}
	}
	peer := authn.Describe(req)
	klog.InfoS("Audit: minted a client certificate", "peer", peer, "user", user, "groups", groups,
		"validity", validity, "notAfter", notAfter.Format(time.RFC3339), "serial", serial)
	if s.Registry != nil {
		s.Registry.Events.NodeEvent(s.Registry.nodeName, v1.EventTypeNormal, "ClientCertificateMinted",
			fmt.Sprintf("%s minted a client certificate for user %q groups %v, valid until %s (serial %s)",
				peer, user, groups, notAfter.Format(time.RFC3339), serial))
	}
}
