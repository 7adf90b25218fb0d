package main

import (
	"fmt"
	"net"
	"net/url"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bootlet/bootlet/reuseport"
)

// apiserverRouter is the router of the apiserver port of this node: the
// port of the pivot's apiserver (or, without a pivot, the checkpointer's),
// asked for /readyz with that client configuration's TLS.
func apiserverRouter(pivot *rest.Config, checkpointerKubeconfig string) (*reuseport.Router, error) {
	cfg := pivot
	if cfg == nil {
		c, err := clientcmd.BuildConfigFromFlags("", checkpointerKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("the checkpointer's kubeconfig: %w", err)
		}
		cfg = c
	}
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Port() == "" {
		return nil, fmt.Errorf("the apiserver address %q names no port: %v", cfg.Host, err)
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	return reuseport.NewRouter(net.JoinHostPort(u.Hostname(), u.Port()), "/readyz", tlsCfg)
}
