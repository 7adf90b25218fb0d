package podapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	//lint:ignore SA1019 client-go 1.36 portforward still takes apimachinery's Dialer
	"k8s.io/apimachinery/pkg/util/httpstream"
	utilexec "k8s.io/utils/exec"

	"github.com/bootlet/bootlet/checkpoint"
)

// The runtime side of these tests is the CRI streaming server containerd
// embeds (k8s.io/cri-streaming, the kubelet's), with a fake runtime behind
// it; the client side is client-go's remotecommand and portforward, as in
// kubectl. Only what is in between, bootlet's handlers, is under test.

type fakeStreamBackend struct {
	echo net.Listener // what port-forward connects to
}

func (f *fakeStreamBackend) Exec(_ context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, _ <-chan remotecommandserver.TerminalSize) error {
	if in != nil {
		data, _ := io.ReadAll(in)
		fmt.Fprintf(out, "stdin:%s\n", data)
	}
	fmt.Fprintf(out, "exec %s in %s tty=%v\n", strings.Join(cmd, " "), id, tty)
	if errw != nil {
		fmt.Fprintln(errw, "to-stderr")
	}
	if cmd[0] == "fail" {
		return utilexec.CodeExitError{Err: errors.New("exit 7"), Code: 7}
	}
	return nil
}

func (f *fakeStreamBackend) Attach(_ context.Context, id string, in io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan remotecommandserver.TerminalSize) error {
	fmt.Fprintf(out, "attached to %s\n", id)
	return nil
}

func (f *fakeStreamBackend) PortForward(_ context.Context, sandbox string, port int32, stream io.ReadWriteCloser) error {
	c, err := net.Dial("tcp", f.echo.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(c, "%s:%d\n", sandbox, port)
	go func() { _, _ = io.Copy(c, stream) }()
	_, err = io.Copy(stream, c)
	return err
}

// streamTestRuntime is a PodRuntime that streams through the CRI server.
type streamTestRuntime struct{ srv streaming.Server }

func (streamTestRuntime) Sync(*v1.Pod)                            {}
func (streamTestRuntime) Terminate(types.UID, time.Duration) bool { return true }
func (streamTestRuntime) Refresh()                                {}
func (streamTestRuntime) Logs(context.Context, *v1.Pod, *v1.PodLogOptions, io.Writer) error {
	return nil
}
func (r streamTestRuntime) GetExec(_ context.Context, pod *v1.Pod, c string, cmd []string, stdin, stdout, stderr, tty bool) (*url.URL, error) {
	resp, err := r.srv.GetExec(&runtimeapi.ExecRequest{ContainerId: string(pod.UID) + "/" + c, Cmd: cmd, Stdin: stdin, Stdout: stdout, Stderr: stderr, Tty: tty})
	if err != nil {
		return nil, err
	}
	return url.Parse(resp.Url)
}
func (r streamTestRuntime) GetAttach(_ context.Context, pod *v1.Pod, c string, stdin, stdout, stderr, tty bool) (*url.URL, error) {
	resp, err := r.srv.GetAttach(&runtimeapi.AttachRequest{ContainerId: string(pod.UID) + "/" + c, Stdin: stdin, Stdout: stdout, Stderr: stderr, Tty: tty})
	if err != nil {
		return nil, err
	}
	return url.Parse(resp.Url)
}
func (r streamTestRuntime) GetPortForward(_ context.Context, pod *v1.Pod, ports []int32) (*url.URL, error) {
	resp, err := r.srv.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: "sb-" + string(pod.UID), Port: ports})
	if err != nil {
		return nil, err
	}
	return url.Parse(resp.Url)
}

func startStreamStack(t *testing.T) (*rest.Config, *fakeStreamBackend) {
	t.Helper()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	backend := &fakeStreamBackend{echo: echo}
	var criHandler http.Handler
	cri := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { criHandler.ServeHTTP(w, r) }))
	t.Cleanup(cri.Close)
	base, _ := url.Parse(cri.URL)
	cfg := streaming.DefaultConfig
	cfg.BaseURL = base
	srv, err := streaming.NewServer(cfg, backend)
	if err != nil {
		t.Fatal(err)
	}
	criHandler = srv

	store, err := checkpoint.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry("node1", store)
	if err != nil {
		t.Fatal(err)
	}
	reg.SetRuntime(streamTestRuntime{srv: srv})
	api := httptest.NewServer(asAdmin(NewServer(reg)))
	t.Cleanup(api.Close)
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p", "default", "0b3e2f4e-1111-2222-3333-444455556661"
	pod.Spec.Containers = []v1.Container{{Name: "c", Image: "busybox"}}
	if _, err := reg.CreatePod(pod, false); err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: api.URL}, backend
}

func TestExecAttachThroughCRIStreamingServer(t *testing.T) {
	cfg, _ := startStreamStack(t)
	execURL := func(q string) *url.URL {
		u, _ := url.Parse(cfg.Host + "/api/v1/namespaces/default/pods/p/exec?" + q)
		return u
	}
	executors := map[string]func(u *url.URL) (remotecommand.Executor, error){
		"spdy": func(u *url.URL) (remotecommand.Executor, error) { return remotecommand.NewSPDYExecutor(cfg, "POST", u) },
		"websocket": func(u *url.URL) (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
		},
	}
	for name, newExec := range executors {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ex, err := newExec(execURL("command=echo&command=hi&stdin=true&stdout=true&stderr=true"))
			if err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("typed"), Stdout: &out, Stderr: &errb}); err != nil {
				t.Fatalf("exec: %v", err)
			}
			if !strings.Contains(out.String(), "stdin:typed") || !strings.Contains(out.String(), "exec echo hi in 0b3e2f4e-1111-2222-3333-444455556661/c tty=false") || errb.String() != "to-stderr\n" {
				t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
			}
			// The exit code comes back as kubectl's CodeExitError.
			ex, _ = newExec(execURL("command=fail&stdout=true"))
			err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
			var exitErr utilexec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 7 {
				t.Fatalf("exit code: %v (%T)", err, err)
			}
			// attach
			u, _ := url.Parse(cfg.Host + "/api/v1/namespaces/default/pods/p/attach?stdout=true")
			ex, _ = newExec(u)
			out.Reset()
			if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out}); err != nil || out.String() != "attached to 0b3e2f4e-1111-2222-3333-444455556661/c\n" {
				t.Fatalf("attach: %v %q", err, out.String())
			}
			// A bad container is a Status before any upgrade.
			ex, _ = newExec(execURL("command=true&stdout=true&container=nope"))
			if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard}); err == nil || !strings.Contains(err.Error(), "container nope is not valid for pod p") {
				t.Fatalf("bad container: %v", err)
			}
		})
	}
}

func TestPortForwardThroughCRIStreamingServer(t *testing.T) {
	cfg, _ := startStreamStack(t)
	u, _ := url.Parse(cfg.Host + "/api/v1/namespaces/default/pods/p/portforward")
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u)
	wsDialer, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, dialer := range map[string]httpstream.Dialer{"spdy": spdyDialer, "websocket": wsDialer} {
		t.Run(name, func(t *testing.T) {
			stop, ready := make(chan struct{}), make(chan struct{})
			defer close(stop)
			fw, err := portforward.New(dialer, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() { errc <- fw.ForwardPorts() }()
			select {
			case <-ready:
			case err := <-errc:
				t.Fatalf("forward: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("port-forward not ready")
			}
			ports, _ := fw.GetPorts()
			for i := 0; i < 2; i++ {
				c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintln(c, "ping")
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				buf := make([]byte, 64)
				n, _ := io.ReadAtLeast(c, buf, len("sb-0b3e2f4e-1111-2222-3333-444455556661:8080\nping\n"))
				c.Close()
				if got := string(buf[:n]); got != "sb-0b3e2f4e-1111-2222-3333-444455556661:8080\nping\n" {
					t.Fatalf("through the forward: %q", got)
				}
			}
		})
	}
}
