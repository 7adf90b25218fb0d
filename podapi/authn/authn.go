package authn

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"

	"golang.org/x/sys/unix"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/user"
)

type userKey struct{}

// WithUser returns a context carrying an authenticated user (the unix
// socket's peer); the API's handler authorizes it.
func WithUser(ctx context.Context, u user.Info) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom is the user WithUser put on ctx, nil when none.
func UserFrom(ctx context.Context) user.Info {
	u, _ := ctx.Value(userKey{}).(user.Info)
	return u
}

// ClientCertificate is the user of req's verified TLS client certificate,
// which must chain to roots for client authentication: nil without TLS or
// when the request presents no certificate.
func ClientCertificate(req *http.Request, roots *x509.CertPool) (user.Info, error) {
	if req.TLS == nil {
		return nil, nil
	}
	a := x509request.New(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, x509request.CommonNameUserConversion)
	resp, ok, err := a.AuthenticateRequest(req)
	if err != nil || !ok {
		return nil, err
	}
	return resp.User, nil
}

// Describe names who sent req for an audit record: the unix socket peer's
// credentials (SO_PEERCRED), or a TLS client certificate's subject.
func Describe(req *http.Request) string {
	if cred := peerFrom(req.Context()); cred != nil {
		return fmt.Sprintf("unix uid=%d gid=%d pid=%d", cred.Uid, cred.Gid, cred.Pid)
	}
	if req.TLS != nil && len(req.TLS.PeerCertificates) > 0 {
		return "x509 subject " + req.TLS.PeerCertificates[0].Subject.String()
	}
	return "unknown"
}

// peerFrom is the socket peer's credentials PeerCred recorded, nil when
// none.
func peerFrom(ctx context.Context) *unix.Ucred {
	cred, _ := ctx.Value(peerKey{}).(*unix.Ucred)
	return cred
}
