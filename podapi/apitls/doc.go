// Package apitls owns the certificates of bootlet's TCP listener: the
// serving certificate (loaded, or made once under ROOT/pki, re-read when
// its files change, renewed in place), the client CA client certificates
// must chain to, the minting of client certificates with that CA, and the
// mutual-TLS configuration the listener serves with.
//
// It must not touch HTTP requests, users or permissions: who a verified
// certificate names is package authn's business, what that user may do
// package authz's, and serving the API over the listener package podapi's.
// It imports neither podapi nor its other sub-packages.
package apitls
