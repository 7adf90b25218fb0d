package podapi

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bootlet/bootlet/podapi/apitls"
)

// unixClient talks HTTP to a unix socket served by serve (ServeUnix or
// ServeReadOnlyUnix) in a temp directory.
func unixClient(t *testing.T, serve func(ctx context.Context, path string) error) *http.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, sock) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}, Timeout: 10 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := c.Get("http://unix/healthz")
		if err == nil {
			resp.Body.Close()
			return c
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func call(t *testing.T, c *http.Client, method, path, body string) (int, string, metav1.Status) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://unix"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var st metav1.Status
	_ = json.Unmarshal(b, &st)
	return resp.StatusCode, string(b), st
}

func mintEvents(t *testing.T, s *Server) []string {
	t.Helper()
	var out []string
	items, _ := s.Registry.Events.store.List("")
	for _, e := range items {
		if e.Reason == "ClientCertificateMinted" {
			out = append(out, e.Message)
		}
	}
	return out
}

// TestMintValidityCappedAndAudited: a validity over the cap is a 422 naming
// the field and mints nothing; one under it, or none, mints a certificate
// no longer than the cap, and each minting leaves an Event naming the
// socket peer's uid.
func TestMintValidityCappedAndAudited(t *testing.T) {
	s, _, _ := newTestServer(t)
	pki, err := apitls.LoadOrCreatePKI(apitls.PKIOptions{Dir: filepath.Join(t.TempDir(), "pki"), NodeName: "node1", Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	s.PKI, s.TCPAddress = pki, "127.0.0.1:6443"
	c := unixClient(t, func(ctx context.Context, p string) error { return s.ServeUnix(ctx, p, 0o600, -1) })

	for _, v := range []string{"25h", "8760h", "-1h", "soon"} {
		code, body, st := call(t, c, http.MethodPost, "/bootlet/v1/kubeconfig?user=u&validity="+v, "")
		if code != http.StatusUnprocessableEntity || st.Reason != metav1.StatusReasonInvalid || st.Details == nil ||
			len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "validity" {
			t.Errorf("validity=%s: want a 422 naming validity, got %d %s", v, code, body)
		}
	}
	if ev := mintEvents(t, s); len(ev) != 0 {
		t.Fatalf("refused requests minted: %v", ev)
	}

	notAfter := func(body string) time.Duration {
		cfg, err := clientcmd.Load([]byte(body))
		if err != nil {
			t.Fatalf("not a kubeconfig: %v\n%s", err, body)
		}
		b, _ := pem.Decode(cfg.AuthInfos["u"].ClientCertificateData)
		crt, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return time.Until(crt.NotAfter)
	}
	code, body, _ := call(t, c, http.MethodPost, "/bootlet/v1/kubeconfig?user=u&validity=1h", "")
	if code != 200 {
		t.Fatalf("validity=1h: %d %s", code, body)
	}
	if d := notAfter(body); d > time.Hour || d < 59*time.Minute {
		t.Errorf("validity=1h: certificate valid for %v", d)
	}
	code, body, _ = call(t, c, http.MethodPost, "/bootlet/v1/kubeconfig?user=u", "")
	if code != 200 {
		t.Fatalf("default validity: %d %s", code, body)
	}
	if d := notAfter(body); d > DefaultMaxMintValidity || d < DefaultMaxMintValidity-time.Minute {
		t.Errorf("default validity: certificate valid for %v, want the cap %v", d, DefaultMaxMintValidity)
	}
	ev := mintEvents(t, s)
	if len(ev) != 2 {
		t.Fatalf("want 2 ClientCertificateMinted events, got %v", ev)
	}
	for _, m := range ev {
		if !strings.Contains(m, "unix uid=0") || !strings.Contains(m, `user "u"`) {
			t.Errorf("event does not name the peer and the user: %q", m)
		}
	}
}

// TestReadOnlySocket: the read-only socket serves reads and logs, and
// refuses writes, Secrets, streams and minting with a 403 Status.
func TestReadOnlySocket(t *testing.T) {
	s, _, store := newTestServer(t)
	mustCreatePod(t, s, goodPod)
	do(s, http.MethodPost, "/api/v1/namespaces/default/secrets", "application/json", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"k":"v"}}`)
	c := unixClient(t, func(ctx context.Context, p string) error { return s.ServeReadOnlyUnix(ctx, p, 0o660, -1) })
	tests := []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/api/v1/namespaces/default/pods/p", "", 200},
		{"GET", "/api/v1/pods", "", 200},
		{"GET", "/api/v1/pods?watch=true&timeoutSeconds=1", "", 200},
		{"GET", "/api/v1/namespaces/default/pods/p/log", "", 200},
		{"GET", "/api/v1/namespaces/default/pods/p/status", "", 200},
		{"GET", "/readyz", "", 503}, // served: recovery has not finished in this test
		{"POST", "/api/v1/namespaces/default/pods", strings.Replace(goodPod, `"p"`, `"q"`, 1), 403},
		{"PUT", "/api/v1/namespaces/default/pods/p", goodPod, 403},
		{"PATCH", "/api/v1/namespaces/default/pods/p", `{}`, 403},
		{"DELETE", "/api/v1/namespaces/default/pods/p", "", 403},
		{"GET", "/api/v1/namespaces/default/secrets/s", "", 403},
		{"GET", "/api/v1/namespaces/default/pods/p/exec?command=sh", "", 403},
		{"POST", "/api/v1/namespaces/default/pods/p/attach", "", 403},
		{"POST", "/api/v1/namespaces/default/pods/p/portforward", "", 403},
		{"POST", "/bootlet/v1/kubeconfig", "", 403},
	}
	for _, tc := range tests {
		code, body, st := call(t, c, tc.method, tc.path, tc.body)
		if code != tc.want {
			t.Errorf("%s %s: want %d, got %d %s", tc.method, tc.path, tc.want, code, body)
			continue
		}
		if code == 403 && (st.Kind != "Status" || st.Reason != metav1.StatusReasonForbidden) {
			t.Errorf("%s %s: 403 is not a Forbidden Status: %s", tc.method, tc.path, body)
		}
	}
	if n := len(store.List("pods")); n != 1 {
		t.Errorf("the read-only socket changed the store: %d pods", n)
	}
	if rec, _ := do(s, http.MethodGet, "/api/v1/namespaces/default/pods/p", "", ""); rec.Code != 200 {
		t.Errorf("the pod is gone after the read-only socket refused its deletion: %d", rec.Code)
	}
}
