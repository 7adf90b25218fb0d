// Package authn says who sent a request to bootlet's API: the user named by
// a verified x509 client certificate (CN the user, O the groups, as the
// apiserver reads them), or, on a unix socket, the peer's credentials
// (SO_PEERCRED): root and the members of the socket's group get in. It
// carries the authenticated user on the request's context.
//
// It must not decide what the user may do (package authz), touch
// certificates or keys beyond verifying a presented chain against the
// roots it is given (package apitls owns them), or write a response:
// package podapi turns a refusal into a Status. It imports neither podapi
// nor its other sub-packages.
package authn
