package checkpointer_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/checkpointer"
	"github.com/bootlet/bootlet/podapi"
)

// TestCheckpointerReconnectsOnKubeconfigChange: a renewed kubeconfig
// (bootlet certs renew rewrites its embedded client certificate) is used
// from the first check after KubeconfigRecheck, not from the daemon's next
// start; until then the clients built from the old one go on.
func TestCheckpointerReconnectsOnKubeconfigChange(t *testing.T) {
	// Two apiservers stand for the old and the new credentials: the
	// kubeconfig's change is seen as the server each tick talks to.
	var mu sync.Mutex
	var seen []string
	server := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/readyz" {
				// Only a tick asks /readyz; the watches do not.
				mu.Lock()
				seen = append(seen, name)
				mu.Unlock()
				fmt.Fprint(w, "ok")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
		}))
	}
	servers := map[string]*httptest.Server{"old": server("old"), "new": server("new")}
	defer servers["old"].Close()
	defer servers["new"].Close()
	dir := t.TempDir()
	kc := filepath.Join(dir, "checkpointer.conf")
	writeKubeconfig := func(which string) {
		t.Helper()
		if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, servers[which].URL)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeKubeconfig("old")
	store, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := podapi.NewRegistry(ckptNode, store)
	if err != nil {
		t.Fatal(err)
	}
	reg.SetRuntime(newRecRuntime())
	now := time.Unix(1_000_000, 0)
	c := checkpointer.New(checkpointer.Config{NodeName: ckptNode, Kubeconfig: kc, Store: store, Registry: reg, Events: reg.Events,
		Namespaces: []string{"kube-system"}, Now: func() time.Time { return now }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tokens := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
	lastTickServer := func() string {
		t.Helper()
		c.Tick(ctx)
		got := tokens()
		if len(got) == 0 {
			t.Fatal("the tick asked no /readyz")
		}
		return got[len(got)-1]
	}
	if got := lastTickServer(); got != "old" {
		t.Fatalf("first tick used %q", got)
	}
	writeKubeconfig("new")
	now = now.Add(checkpointer.KubeconfigRecheck / 2)
	if got := lastTickServer(); got != "old" {
		t.Errorf("before the recheck the tick used %q, want the clients of the old kubeconfig", got)
	}
	now = now.Add(checkpointer.KubeconfigRecheck)
	if got := lastTickServer(); got != "new" {
		t.Errorf("after the recheck the tick used %q, want the changed kubeconfig's", got)
	}
	if !c.Status().Reachable {
		t.Errorf("status not reachable: %+v", c.Status())
	}
}
