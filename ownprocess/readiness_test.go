package ownprocess

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
)

// TestReadyzOnceFindsTheAcceptingProcess runs the check against a TLS
// server in this very process: the server side of the connection is found
// by sock_diag and among this process's fds, and not among those of a
// process the matcher does not select.
func TestReadyzOnceFindsTheAcceptingProcess(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	srv.StartTLS()
	defer srv.Close()
	addr := srv.Listener.Addr().(*net.TCPAddr)
	tlsCfg := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}} //nolint:gosec // httptest's self-signed certificate
	self := "/proc/" + strconv.Itoa(os.Getpid())

	mine, code, err := readyzOnce(context.Background(), addr.String(), "/readyz", tlsCfg, func(proc string) bool { return proc == self })
	if err != nil || !mine || code != http.StatusOK {
		t.Fatalf("this process's server: mine=%v code=%d err=%v", mine, code, err)
	}
	mine, code, err = readyzOnce(context.Background(), addr.String(), "/readyz", tlsCfg, func(string) bool { return false })
	if err != nil || mine || code != http.StatusOK {
		t.Errorf("no process selected: mine=%v code=%d err=%v", mine, code, err)
	}
	mine, code, err = readyzOnce(context.Background(), addr.String(), "/nope", tlsCfg, func(proc string) bool { return proc == self })
	if err != nil || !mine || code != http.StatusNotFound {
		t.Errorf("another path: mine=%v code=%d err=%v", mine, code, err)
	}
}

// TestReadyzOnceUnansweredConnection: a listener that is bound but does not
// accept (an apiserver before it serves) fails the check within the wait.
func TestReadyzOnceUnansweredConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().(*net.TCPAddr)
	_, _, err = readyzOnce(context.Background(), addr.String(), "/readyz", &tls.Config{InsecureSkipVerify: true}, func(string) bool { return true }) //nolint:gosec // never answered
	if err == nil {
		t.Fatal("a listener that never accepts: want an error")
	}
}

// TestServesReadinessNamedPort: a readiness probe on a named port (as in a
// pod spec that names its ports) is resolved against the container's
// ports, as the kubelet's prober does; the answer's status counts.
func TestServesReadinessNamedPort(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
	defer srv.Close()
	addr := srv.Listener.Addr().(*net.TCPAddr)
	self := "/proc/" + strconv.Itoa(os.Getpid())
	pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: true, Containers: []v1.Container{{Name: "c",
		Ports: []v1.ContainerPort{{Name: "probe-port", ContainerPort: int32(addr.Port)}},
		ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
			Host: "127.0.0.1", Path: "/readyz", Port: intstr.FromString("probe-port"), Scheme: v1.URISchemeHTTP}}}}}}}
	if ok, why := servesReadinessAs(context.Background(), nil, pod, func(proc string) bool { return proc == self }); !ok {
		t.Fatalf("named port: not serving: %s", why)
	}
	status = http.StatusInternalServerError
	if ok, why := servesReadinessAs(context.Background(), nil, pod, func(proc string) bool { return proc == self }); ok || !strings.Contains(why, "500") {
		t.Errorf("answering 500: ok=%v why=%q", ok, why)
	}
	pod.Spec.Containers[0].ReadinessProbe.HTTPGet.Port = intstr.FromString("no-such-port")
	if ok, why := servesReadinessAs(context.Background(), nil, pod, func(string) bool { return true }); ok || !strings.Contains(why, "not usable") {
		t.Errorf("an unknown port name: ok=%v why=%q", ok, why)
	}
}

// fakeVerdicts is a router that knows one port.
type fakeVerdicts struct {
	port           int
	known, serving bool
	askedPort      int
}

func (f *fakeVerdicts) ServedBy(port int, _ func(string) bool) (bool, bool) {
	f.askedPort = port
	if port != f.port {
		return false, false
	}
	return f.known, f.serving
}

// TestServesReadinessVia: the router's verdict on the pod's listener
// decides when it has one; without one, the fresh connections do (here a
// pod whose probe port nothing listens on, which they cannot reach).
func TestServesReadinessVia(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens: only the router's verdict can say "serves"
	pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: true, Containers: []v1.Container{{Name: "c",
		ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
			Host: "127.0.0.1", Path: "/readyz", Port: intstr.FromInt32(int32(port)), Scheme: v1.URISchemeHTTP}}}}}}}
	tests := []struct {
		name    string
		v       *fakeVerdicts
		ok      bool
		whyPart string
	}{
		{"the router saw its listener serve", &fakeVerdicts{port: port, known: true, serving: true}, true, ""},
		{"the router saw its listener refuse: fresh connections decide", &fakeVerdicts{port: port, known: true}, false, "refused"},
		{"the router does not know it: fresh connections decide", &fakeVerdicts{port: port}, false, "refused"},
		{"the router routes another port: fresh connections decide", &fakeVerdicts{port: port + 1, known: true, serving: true}, false, "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, why := ServesReadinessVia(context.Background(), tt.v, nil, pod)
			if ok != tt.ok || !strings.Contains(why, tt.whyPart) {
				t.Errorf("ServesReadinessVia = %v %q, want %v …%s…", ok, why, tt.ok, tt.whyPart)
			}
			if tt.v.askedPort != port {
				t.Errorf("the router was asked about port %d, want the probe's %d", tt.v.askedPort, port)
			}
		})
	}
	if ok, _ := ServesReadinessVia(context.Background(), nil, nil, pod); ok {
		t.Errorf("no router and nothing listening: serving")
	}
}

// TestServesReadinessNamesTheAPIAddress: an HTTPS endpoint's certificate
// is checked for the name the configuration reaches the API by, not for
// the endpoint's address: a node made a master after the render serves
// the cluster's certificate, which does not name its address. A
// certificate that does not name the API address still fails.
func TestServesReadinessNamesTheAPIAddress(t *testing.T) {
	// httptest's certificate names example.com, 127.0.0.1 and ::1; the
	// probe's host here is a loopback address it does not name.
	const host = "127.0.0.2"
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	var err error
	if srv.Listener, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err != nil {
		t.Fatal(err)
	}
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	self := "/proc/" + strconv.Itoa(os.Getpid())
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: true, Containers: []v1.Container{{Name: "c",
		ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
			Host: host, Path: "/readyz", Port: intstr.FromInt(port), Scheme: v1.URISchemeHTTPS}}}}}}}
	mine := func(proc string) bool { return proc == self }
	for _, tc := range []struct {
		name, apiHost string
		ok            bool
	}{
		{"the API address is a name the certificate has", "https://example.com:6443", true},
		{"the API address is an address the certificate has", "https://127.0.0.1:6443", true},
		{"the API address is one it does not have", "https://192.0.2.1:6443", false},
	} {
		cfg := &rest.Config{Host: tc.apiHost, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
		if ok, why := servesReadinessAs(context.Background(), cfg, pod, mine); ok != tc.ok {
			t.Errorf("%s: serving %v (%s); want %v", tc.name, ok, why, tc.ok)
		}
	}
}
