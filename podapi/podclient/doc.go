// Package podclient is the client side of bootlet's pod API: what the CLI's
// verbs (apply, get, delete, logs, kubeconfig, status) do against a running daemon,
// through any client-go kubernetes.Interface, so each verb's command only
// parses its flags, calls one function here and prints the result.
//
// It owns the verbs' semantics: which fields apply may change on an existing
// object and how it reports the outcome (kubectl's created, configured,
// unchanged), which resources get and delete know, and when delete counts a
// pod as gone. It does no printing of tables or YAML (cmd/internal/cli does).
//
// It must not import package podapi or anything of the daemon's (runner,
// cri, checkpoint): it speaks to the daemon over the API only, the way any
// Kubernetes client would. Nor may it import kubectl's describers or any
// other library the daemon's binary is kept free of (cmd/bootlet/deps_test.go),
// since bootlet's own verbs link it.
package podclient
