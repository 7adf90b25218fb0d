// Package status owns `bootlet status`: the node's lifecycle phase (package
// nodephase, as the daemon serves it on its Node), each pod's owner and the
// daemon's readiness checks, all read from the daemon's API.
package status
