package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/ownprocess"
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

// portHandover is the hand-over the pivot and the checkpointer call before
// they withdraw an apiserver: it waits, at most drain, until r sends every
// new connection to incoming's listener (it does once incoming serves) and
// no process of outgoing holds a connection on the port. One that cannot
// finish is logged, and the withdrawal goes on as without it.
func portHandover(r *reuseport.Router, drain time.Duration) func(ctx context.Context, incoming, outgoing types.UID) {
	return func(ctx context.Context, incoming, outgoing types.UID) {
		res, err := r.Handover(ctx, ownprocess.InPod(incoming), ownprocess.InPod(outgoing), drain)
		if err != nil {
			klog.ErrorS(err, "Port hand-over failed; withdrawing without it", "port", r.Port(), "incoming", incoming, "outgoing", outgoing)
			return
		}
		klog.InfoS("Port hand-over", "port", r.Port(), "incoming", incoming, "outgoing", outgoing,
			"routed", res.Routed, "connectionsLeft", res.Left, "waited", res.Waited.Round(time.Millisecond), "why", res.Why)
	}
}
