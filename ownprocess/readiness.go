package ownprocess

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/pkg/probe"
)

// Which process answers: two apiservers share a port (SO_REUSEPORT), so a Ready condition may be the
// other's answer; the check and why: docs/design/pivot.md, "Which process answers `/readyz`".

// ServesReadiness reports whether a process of pod (on this node, in the
// host network) itself answers the HTTP readiness probe of its first
// container with 200, and why not. restCfg gives the TLS client settings
// for an HTTPS probe (the apiserver's CA and a client certificate).
func ServesReadiness(ctx context.Context, restCfg *rest.Config, pod *v1.Pod) (bool, string) {
	return servesReadinessAs(ctx, restCfg, pod, InPod(pod.UID))
}

// Verdicts is what a port's router knows of its listeners
// (reuseport.Router): whether a process match selects holds a listener on
// port, and whether that listener itself answered the readiness path when
// the router last asked it.
type Verdicts interface {
	ServedBy(port int, match func(proc string) bool) (known, serving bool)
}

// ServesReadinessVia is ServesReadiness that first asks v (nil: no
// router). A router sends every new connection to one listener, so fresh
// connections may never reach the pod's process (the target is another
// apiserver, such as a checkpoint whose container restarted); the router
// asks each listener through a slot of its own and knows. Where it has no
// 200 from the pod's listener, the fresh connections decide.
func ServesReadinessVia(ctx context.Context, v Verdicts, restCfg *rest.Config, pod *v1.Pod) (bool, string) {
	if v != nil {
		if get, port, err := ReadinessHTTPGet(pod); get != nil && err == nil {
			// A 200 to the router's own probe of the pod's listener is
			// proof. Anything else is not proof of the contrary: a router
			// whose probes cannot get through (seen in a systemd-nspawn
			// node) finds no listener serving, so the fresh connections
			// still decide.
			if known, serving := v.ServedBy(port, InPod(pod.UID)); known && serving {
				return true, ""
			}
		}
	}
	return ServesReadiness(ctx, restCfg, pod)
}

// ReadinessHTTPGet is the HTTP readiness probe of the pod's first container
// (nil: none) and its port, a named port resolved against the container's
// ports as the kubelet's prober does.
func ReadinessHTTPGet(pod *v1.Pod) (*v1.HTTPGetAction, int, error) {
	if len(pod.Spec.Containers) == 0 || pod.Spec.Containers[0].ReadinessProbe == nil || pod.Spec.Containers[0].ReadinessProbe.HTTPGet == nil {
		return nil, 0, nil
	}
	get := pod.Spec.Containers[0].ReadinessProbe.HTTPGet
	port, err := probe.ResolveContainerPort(get.Port, &pod.Spec.Containers[0])
	return get, port, err
}

// servesReadinessAs is ServesReadiness with the pod's processes selected by
// match (a /proc/PID path).
func servesReadinessAs(ctx context.Context, restCfg *rest.Config, pod *v1.Pod, match func(proc string) bool) (bool, string) {
	get, port, err := ReadinessHTTPGet(pod)
	if get == nil {
		return false, "the pod has no HTTP readiness probe to check"
	}
	host := get.Host
	if host == "" {
		host = pod.Status.PodIP
	}
	if host == "" || err != nil || port <= 0 {
		return false, fmt.Sprintf("readiness endpoint %s:%s is not usable: %v", host, get.Port.String(), err)
	}
	var tlsCfg *tls.Config
	if get.Scheme == v1.URISchemeHTTPS {
		if restCfg == nil {
			return false, "no client configuration for an HTTPS readiness endpoint"
		}
		c, err := rest.TLSConfigFor(restCfg)
		if err != nil {
			return false, "TLS configuration: " + err.Error()
		}
		if c == nil {
			c = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		c = c.Clone()
		c.ServerName = serverName(restCfg, host)
		c.NextProtos = []string{"http/1.1"}
		tlsCfg = c
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	path := get.Path
	if path == "" {
		path = "/"
	}
	for i := 0; i < readyzTries; i++ {
		mine, code, err := readyzOnce(ctx, addr, path, tlsCfg, match)
		if err != nil {
			// Unanswered: queued at a listener that does not serve yet,
			// or refused. Either way not a proof of serving.
			return false, err.Error()
		}
		if !mine {
			continue // answered by the other apiserver; try a new connection
		}
		if code != http.StatusOK {
			return false, fmt.Sprintf("its own /readyz answered %d", code)
		}
		return true, ""
	}
	return false, fmt.Sprintf("none of %d connections reached a process of the pod", readyzTries)
}

// readyzOnce sends one GET over a fresh connection and reports whether a
// process that match selects accepted that connection, and the status.
func readyzOnce(ctx context.Context, addr, path string, tlsCfg *tls.Config, match func(proc string) bool) (bool, int, error) {
	ctx, cancel := context.WithTimeout(ctx, readyzWait)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, 0, err
	}
	defer raw.Close()
	deadline, _ := ctx.Deadline()
	_ = raw.SetDeadline(deadline)
	conn := raw
	if tlsCfg != nil {
		tc := tls.Client(raw, tlsCfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return false, 0, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		conn = tc
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		return false, 0, err
	}
	if err := req.Write(conn); err != nil {
		return false, 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return false, 0, fmt.Errorf("GET %s%s: %w", addr, path, err)
	}
	resp.Body.Close()
	// The connection is still open: its server side is a socket of the
	// process that accepted it.
	mine, err := acceptedBy(raw.RemoteAddr().(*net.TCPAddr).AddrPort(), raw.LocalAddr().(*net.TCPAddr).AddrPort(), match)
	return mine, resp.StatusCode, err
}

const (
	// readyzTries fresh connections are opened before giving up on reaching
	// a process of the pod (the kernel spreads them over the listeners).
	readyzTries = 16
	readyzWait  = 2 * time.Second
)

// serverName is the name the readiness endpoint's certificate is checked
// for: the configuration's own (its TLS server name, else its host's
// name: the API address every apiserver's certificate names, the one a
// client of the configuration reaches), else the endpoint's host. Not
// the endpoint's address first: the self-hosted apiservers share the
// cluster's serving certificate, which names the masters the cluster was
// rendered with and the API address, but not a node an administrator
// has made a master since.
func serverName(restCfg *rest.Config, host string) string {
	if restCfg.TLSClientConfig.ServerName != "" {
		return restCfg.TLSClientConfig.ServerName
	}
	if u, err := url.Parse(restCfg.Host); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return host
}
