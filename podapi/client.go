package podapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// DefaultSocket is where the daemon listens by default.
const DefaultSocket = "/run/bootlet/bootlet.sock"

// ServerFromEnv returns --server, else $BOOTLET_SERVER, else the default
// socket.
func ServerFromEnv(flag string) string {
	if flag != "" {
		return flag
	}
	if s := os.Getenv("BOOTLET_SERVER"); s != "" {
		return s
	}
	return "unix://" + DefaultSocket
}

// RESTConfig returns a client-go config for server (unix:///path). The API
// is the Kubernetes REST shape, so every client-go client works against it.
func RESTConfig(server string) (*rest.Config, error) {
	if !strings.HasPrefix(server, "unix://") {
		return nil, fmt.Errorf("server %q: only unix:// addresses are supported by this client", server)
	}
	path := strings.TrimPrefix(server, "unix://")
	dialer := &net.Dialer{}
	return &rest.Config{
		Host: "http://bootlet",
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", path)
		},
		UserAgent:     "bootlet-cli",
		ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"},
		QPS:           100, Burst: 200,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return rt },
	}, nil
}

// NewClient returns a clientset for server.
func NewClient(server string) (*kubernetes.Clientset, error) {
	cfg, err := RESTConfig(server)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
