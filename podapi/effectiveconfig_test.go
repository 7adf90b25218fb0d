package podapi

import (
	"context"
	"net/http"
	"testing"
)

// TestEffectiveConfigServed: the unix socket serves the daemon's
// configuration as set, 404 before it is, and only to a GET.
func TestEffectiveConfigServed(t *testing.T) {
	s, _, _ := newTestServer(t)
	c := unixClient(t, func(ctx context.Context, p string) error { return s.ServeUnix(ctx, p, 0o600, -1) })
	if code, body, _ := call(t, c, http.MethodGet, EffectiveConfigPath, ""); code != http.StatusNotFound {
		t.Errorf("unset: %d %s", code, body)
	}
	s.EffectiveConfig = []byte("rootDir: /srv/bootlet\n")
	if code, body, _ := call(t, c, http.MethodGet, EffectiveConfigPath, ""); code != http.StatusOK || body != "rootDir: /srv/bootlet\n" {
		t.Errorf("set: %d %q", code, body)
	}
	if code, _, _ := call(t, c, http.MethodPost, EffectiveConfigPath, ""); code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", code)
	}
}
