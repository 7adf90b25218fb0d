//go:build bootlet_tools

package main

import (
	"strings"
	"testing"
	"time"
)

const testHash = "sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"

func TestJoinFlagsValidate(t *testing.T) {
	good := func() joinFlags {
		return joinFlags{endpoint: "192.0.2.10:6443", token: "abcdef.0123456789abcdef", caCertHashes: []string{testHash}, out: "/etc/kubernetes", timeout: time.Minute,
			criSocket: "unix:///run/containerd/containerd.sock"}
	}
	for _, c := range []struct {
		name   string
		change func(*joinFlags)
		want   string // substring of the error; "" accepts
	}{
		{"good", func(*joinFlags) {}, ""},
		{"a DNS endpoint", func(f *joinFlags) { f.endpoint = "api.example:6443" }, ""},
		{"an IPv6 endpoint", func(f *joinFlags) { f.endpoint = "[2001:db8::1]:6443" }, ""},
		{"two hashes", func(f *joinFlags) {
			f.caCertHashes = append(f.caCertHashes, strings.ToUpper(testHash[:7])+testHash[7:])
		}, ""},
		{"a URL endpoint", func(f *joinFlags) { f.endpoint = "https://192.0.2.10:6443" }, "want HOST:PORT"},
		{"no port", func(f *joinFlags) { f.endpoint = "192.0.2.10" }, "want HOST:PORT"},
		{"no host", func(f *joinFlags) { f.endpoint = ":6443" }, "want HOST:PORT"},
		{"no token", func(f *joinFlags) { f.token = "" }, "--token"},
		{"upper-case token", func(f *joinFlags) { f.token = "ABCDEF.0123456789abcdef" }, "--token"},
		{"short secret", func(f *joinFlags) { f.token = "abcdef.0123456789" }, "--token"},
		{"no hash", func(f *joinFlags) { f.caCertHashes = nil }, "--discovery-token-ca-cert-hash is required"},
		{"short hash", func(f *joinFlags) { f.caCertHashes = []string{"sha256:abcd"} }, "expected a 32 byte SHA-256 hash"},
		{"no format", func(f *joinFlags) { f.caCertHashes = []string{testHash[7:]} }, "invalid hash"},
		{"md5", func(f *joinFlags) { f.caCertHashes = []string{"md5:" + testHash[7:]} }, "unknown hash format"},
		{"no out", func(f *joinFlags) { f.out = "" }, "--out"},
		{"no timeout", func(f *joinFlags) { f.timeout = 0 }, "--discovery-timeout"},
		{"a relative out", func(f *joinFlags) { f.out = "worker" }, ""},
		{"a pod logs dir", func(f *joinFlags) { f.podLogsDir = "/var/log/worker-pods" }, ""},
		{"no CRI socket", func(f *joinFlags) { f.criSocket = "" }, "--cri-socket"},
		{"a TCP CRI endpoint", func(f *joinFlags) { f.criSocket = "tcp://127.0.0.1:1234" }, "--cri-socket"},
		{"a CRI socket path without unix://", func(f *joinFlags) { f.criSocket = "/run/containerd/containerd.sock" }, "--cri-socket"},
		{"a relative CRI socket", func(f *joinFlags) { f.criSocket = "unix://run/containerd.sock" }, "--cri-socket"},
		{"a relative pod logs dir", func(f *joinFlags) { f.podLogsDir = "logs" }, "--pod-logs-dir"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := good()
			c.change(&f)
			err := f.validate()
			if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
				t.Fatalf("validate: %v, want %q", err, c.want)
			}
			// A bad token is never echoed: it may be a real one mistyped.
			if err != nil && f.token != "" && strings.Contains(err.Error(), f.token) {
				t.Errorf("the error repeats the token: %v", err)
			}
		})
	}
}

// TestJoinConfiguration: kubeadm's token discovery with the CA pinned, and
// the same token for the TLS bootstrap.
func TestJoinConfiguration(t *testing.T) {
	f := joinFlags{endpoint: "192.0.2.10:6443", token: "abcdef.0123456789abcdef", caCertHashes: []string{testHash}, out: "/x", timeout: 42 * time.Second}
	jc := f.joinConfiguration()
	bt := jc.Discovery.BootstrapToken
	if bt == nil || bt.Token != f.token || bt.APIServerEndpoint != f.endpoint || len(bt.CACertHashes) != 1 || bt.CACertHashes[0] != testHash ||
		bt.UnsafeSkipCAVerification || jc.Discovery.TLSBootstrapToken != f.token || jc.Discovery.File != nil ||
		jc.Timeouts == nil || jc.Timeouts.Discovery.Duration != 42*time.Second {
		t.Errorf("join configuration %+v, token discovery %+v", jc, bt)
	}
}

func TestJoinCommandLine(t *testing.T) {
	for _, c := range []struct {
		hashes []string
		want   string
	}{
		{[]string{testHash}, "bootlet join 192.0.2.10:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash " + testHash},
		{[]string{testHash, "sha256:ff"}, "bootlet join 192.0.2.10:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash " + testHash + " --discovery-token-ca-cert-hash sha256:ff"},
	} {
		if got := joinCommandLine("192.0.2.10:6443", "abcdef.0123456789abcdef", c.hashes); got != c.want {
			t.Errorf("joinCommandLine: %q, want %q", got, c.want)
		}
	}
}

func TestAPIEndpoint(t *testing.T) {
	for _, c := range []struct{ server, want, err string }{
		{"https://192.0.2.10:6443", "192.0.2.10:6443", ""},
		{"https://api.example", "api.example:443", ""},
		{"https://[2001:db8::1]:6443", "[2001:db8::1]:6443", ""},
		{"http://192.0.2.10:6443", "", "want https://"},
		{"192.0.2.10:6443", "", "want https://"},
		{"https://:6443", "", "want https://"},
	} {
		got, err := apiEndpoint(c.server)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("apiEndpoint(%q) = %q, %v; want %q, %q", c.server, got, err, c.want, c.err)
		}
	}
}
