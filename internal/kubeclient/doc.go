// Package kubeclient is bootlet's one way to build an apiserver client
// from a kubeconfig: the daemon's, from a file that may appear after the
// daemon starts and may change under it (a renewed client certificate is
// written into it), and a command's one-shot client (ForFile, ForConfig),
// each with bootlet's user agent and a request timeout. It owns only the
// file's reading and the client's building; it makes no API call.
package kubeclient
