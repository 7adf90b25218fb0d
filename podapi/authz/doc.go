// Package authz decides what an authenticated user may do with the API, as
// the apiserver's RBAC would with bootlet's two roles: the admin groups may
// do everything, the reader groups may get, list and watch everything but
// Secrets and read logs, every authenticated user may read discovery,
// health and version, and anyone else is refused. It also owns how a
// request is read for that decision (RequestInfo, Attributes) and which
// requests count as writes.
//
// It must not touch who the user is (package authn), certificates (package
// apitls) or the registry, and it writes no response: package podapi turns
// a refusal into a Status. It imports neither podapi nor its other
// sub-packages.
package authz
