package servinggate

import (
	"os"
	"path/filepath"
	"testing"
)

// TestConnectKubeconfigAppearsLater: a kubeconfig written after the gate
// starts is used from the next round on.
func TestConnectKubeconfigAppearsLater(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpointer.conf")
	g := New(Config{NodeName: node, Kubeconfig: path})
	if cs := g.connect(); cs != nil {
		t.Fatal("a client without a kubeconfig")
	}
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if cs := g.connect(); cs == nil {
		t.Fatal("the kubeconfig that appeared was not used")
	}
	if g.serves == nil {
		t.Error("no own-process check with the kubeconfig's TLS settings")
	}
}
