package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/ownprocess"
	"github.com/bootlet/bootlet/reuseport"
)

// apiserverRouter is the router of the apiserver port of this node: the
// port of the pivot's apiserver (or, without a pivot, the checkpointer's),
// asked for /readyz with that client configuration's TLS (pivotKubeconfig
// is pivot's file).
//
// The router probes this node's own apiserver listeners, so it dials this
// node's address: the kubeconfig's host, unless the bootstrap apiserver of
// manifestsDir (render's bootstrap-manifests/) advertises another, as a
// master's does when the kubeconfigs name a control-plane endpoint (a VIP,
// which may be held by another master): then that address and port. On
// one node without an endpoint both are the same.
//
// It routes only to the listeners of the apiserver containers apiservers
// lists (criApiservers).
func apiserverRouter(pivot *rest.Config, pivotKubeconfig, checkpointerKubeconfig, manifestsDir string, apiservers func(context.Context) ([]reuseport.Apiserver, error)) (*reuseport.Router, error) {
	cfg, path := pivot, pivotKubeconfig
	if cfg == nil {
		path = checkpointerKubeconfig
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
	addr := net.JoinHostPort(u.Hostname(), u.Port())
	if own, ok := bootstrapAPIServerAddress(readManifestPods(manifestsDir)); ok && own != addr {
		klog.InfoS("Routing the apiserver port at the bootstrap apiserver's advertised address, not the kubeconfig's", "address", own, "kubeconfig", cfg.Host)
		addr = own
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	if len(cfg.CertData) > 0 && len(tlsCfg.Certificates) == 1 {
		// Each full handshake of a probe presents the certificate the
		// kubeconfig holds then, so a renewed one (bootlet certs renew) is
		// used before the one read at start expires, when /readyz would
		// refuse it and no apiserver would seem to serve. The router's
		// resumed sessions carry the certificate of their full handshake:
		// it starts a new one at least every few minutes and after a
		// refusal (reuseport's tlsFor).
		tlsCfg.GetClientCertificate = kubeconfigClientCert(path, tlsCfg.Certificates[0])
		tlsCfg.Certificates = nil
	}
	return reuseport.NewRouter(addr, "/readyz", tlsCfg, apiservers)
}

// criApiservers lists the running apiserver containers of this node from
// the container runtime: its own (the bootstrap and checkpoint apiservers)
// and the kubelet's (the self-hosted DaemonSet's), which share the runtime
// and its labels. An apiserver is the kube-apiserver container of a
// kube-system pod, as render and the pivot name it; only the runtime makes
// containers, and a pod in kube-system takes the cluster's admin.
func criApiservers(rt internalapi.RuntimeService) func(context.Context) ([]reuseport.Apiserver, error) {
	return func(ctx context.Context) ([]reuseport.Apiserver, error) {
		ctrs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{cri.LabelContainerName: "kube-apiserver", cri.LabelPodNamespace: metav1.NamespaceSystem},
		})
		if err != nil {
			return nil, fmt.Errorf("list the apiserver containers: %w", err)
		}
		out := make([]reuseport.Apiserver, 0, len(ctrs))
		for _, c := range ctrs {
			if uid := c.Labels[cri.LabelPodUID]; uid != "" && c.Id != "" {
				out = append(out, reuseport.Apiserver{PodUID: types.UID(uid), ContainerID: c.Id})
			}
		}
		return out, nil
	}
}

// readManifestPods are the pods of dir's *.yaml files (none when dir is
// empty or unreadable; a file that is not a pod is skipped).
func readManifestPods(dir string) []*v1.Pod {
	if dir == "" {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var pods []*v1.Pod
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pod := &v1.Pod{}
		if err := yaml.Unmarshal(data, pod); err == nil && pod.Kind == "Pod" {
			pods = append(pods, pod)
		}
	}
	return pods
}

// bootstrapAPIServerAddress is HOST:PORT of the apiserver among pods (a
// container running kube-apiserver): its --advertise-address and
// --secure-port. false when there is none or it lacks either flag.
func bootstrapAPIServerAddress(pods []*v1.Pod) (string, bool) {
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			args := append(append([]string{}, c.Command...), c.Args...)
			if len(args) == 0 || filepath.Base(args[0]) != "kube-apiserver" {
				continue
			}
			var host, port string
			for _, a := range args[1:] {
				if v, ok := strings.CutPrefix(a, "--advertise-address="); ok {
					host = v
				} else if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
					port = v
				}
			}
			if net.ParseIP(host) == nil || port == "" {
				return "", false
			}
			return net.JoinHostPort(host, port), true
		}
	}
	return "", false
}

// kubeconfigClientCert is a tls.Config.GetClientCertificate that returns
// the client certificate embedded in the kubeconfig at path, parsed again
// only when the file's bytes change; until the file makes a valid pair,
// the last good one (at first, initial).
func kubeconfigClientCert(path string, initial tls.Certificate) func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	var mu sync.Mutex
	var last []byte
	current := &initial
	return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		data, err := os.ReadFile(path)
		mu.Lock()
		defer mu.Unlock()
		if err != nil || bytes.Equal(data, last) {
			return current, nil
		}
		last = data
		cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
		if err != nil {
			return current, nil
		}
		if c, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData); err == nil {
			current = &c
		}
		return current, nil
	}
}

// portHandover is the hand-over the pivot and the checkpointer call before
// they withdraw an apiserver: it waits, at most drain, until r sends every
// new connection to incoming's listener (it does once incoming serves) and
// no process of outgoing holds a connection on the port, or the route has
// been in place for drain (reuseport.Decide). One that cannot
// finish is logged, and the withdrawal goes on as without it.
func portHandover(r *reuseport.Router, drain time.Duration) func(ctx context.Context, incoming, outgoing types.UID) {
	return func(ctx context.Context, incoming, outgoing types.UID) {
		res, err := r.Handover(ctx, ownprocess.InPod(incoming), ownprocess.InPod(outgoing), drain)
		if err != nil {
			klog.ErrorS(err, "Port hand-over failed; withdrawing without it", "port", r.Port(), "incoming", incoming, "outgoing", outgoing)
			return
		}
		klog.InfoS("Port hand-over", "port", r.Port(), "incoming", incoming, "outgoing", outgoing,
			"routed", res.Routed, "routedFor", res.RoutedFor.Round(time.Millisecond), "connectionsLeft", res.Left, "waited", res.Waited.Round(time.Millisecond), "why", res.Why)
	}
}

// routerSlot holds the apiserver port's router, which the serving gate,
// the pivot and the checkpointer are given at the start, before there may
// be one: on a worker labelled a master the router is built once its
// identity arrives (masters/agent writes the checkpointer's kubeconfig),
// and on any node a router that did not build is tried again. Until a
// router is put in it, the slot knows no listener (the gate asks fresh
// connections) and has no hand-over to wait for, as on a node whose port
// is not routed. On a worker no pod of the control plane runs before the
// identity does: its etcd member is prepared only once the identity and
// the member's certificate are on disk.
type routerSlot struct {
	router atomic.Pointer[reuseport.Router]
	drain  time.Duration
}

var _ ownprocess.Verdicts = (*routerSlot)(nil)

// ServedBy is the router's verdict, or none yet.
func (s *routerSlot) ServedBy(port int, match func(proc string) bool) (known, serving bool) {
	if r := s.router.Load(); r != nil {
		return r.ServedBy(port, match)
	}
	return false, false
}

// handover is portHandover through the router once there is one.
func (s *routerSlot) handover(ctx context.Context, incoming, outgoing types.UID) {
	r := s.router.Load()
	if r == nil {
		klog.InfoS("Withdrawing an apiserver without a port hand-over: the port is not routed yet", "incoming", incoming, "outgoing", outgoing)
		return
	}
	portHandover(r, s.drain)(ctx, incoming, outgoing)
}

// routeWhenPresent waits until the file at path is there (polling every
// interval; no path: no wait), then builds the router with build, runs it until ctx ends
// and puts it in the slot. A router that cannot be built is logged (once
// per distinct error) and tried again at the next interval: the file may
// have been read half-written, and an unrouted port is what a withdrawal
// must not meet.
func (s *routerSlot) routeWhenPresent(ctx context.Context, path string, interval time.Duration, build func() (*reuseport.Router, error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last string
	for {
		if _, err := os.Stat(path); path == "" || err == nil {
			r, err := build()
			if err == nil {
				go r.Run(ctx)
				s.router.Store(r)
				klog.InfoS("Routing the apiserver port", "kubeconfig", path, "port", r.Port())
				return
			}
			if err.Error() != last {
				last = err.Error()
				klog.ErrorS(err, "The apiserver port is not routed yet: a withdrawn apiserver may refuse requests (see --apiserver-handover-drain); trying again", "every", interval)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
