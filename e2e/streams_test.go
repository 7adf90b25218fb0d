//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// streamPods: a shell, an attachable reader, and testserver on the pod
// network and on the host network (on a free port).
func streamPods(hostPort int) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: shell}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {fsGroup: 4321}
  containers:
  - name: main
    image: %[1]s
    command: ["sleep", "3600"]
    volumeMounts: [{name: s, mountPath: /etc/s}]
  volumes:
  - name: s
    secret: {secretName: creds}
---
apiVersion: v1
kind: Pod
metadata: {name: reader}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %[1]s
    stdin: true
    command: ["sh", "-c", "while read l; do echo got:$l; done"]
---
apiVersion: v1
kind: Pod
metadata: {name: podnet}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: server
    image: %[2]s
    env: [{name: HTTP_PORT, value: "8080"}]
---
apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  terminationGracePeriodSeconds: 1
  hostNetwork: true
  containers:
  - name: server
    image: %[2]s
    env:
    - {name: HTTP_PORT, value: "%[3]d"}
    - {name: TCP_PORT, value: "%[4]d"}
    - {name: GRPC_PORT, value: "%[5]d"}
`, busybox, testserver, hostPort, freePort(nil), freePort(nil))
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if t != nil {
			t.Fatal(err)
		}
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestKubectlStreams: kubectl exec (with and without a terminal, exit code),
// attach and port-forward (pod network and host network), over websockets
// (kubectl 1.36's default) and over SPDY (its fallback), through mTLS.
func TestKubectlStreams(t *testing.T) {
	c := StartContainerd(t)
	b := StartBootlet(t, c, "--listen", "127.0.0.1:0")
	k := newKubectlEnv(t, b)
	hostPort := freePort(t)
	k.must(t, "", "create", "secret", "generic", "creds", "--from-literal=token=s3cr3t")
	k.must(t, streamPods(hostPort), "create", "-f", "-")
	k.must(t, "", "wait", "--for=condition=Ready", "pod/shell", "pod/reader", "pod/podnet", "pod/hostnet", "--timeout=90s")

	for _, mode := range []struct {
		name string
		env  []string
	}{
		{"websocket", nil},
		{"spdy", []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			run := func(stdin string, args ...string) (string, int) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
				cmd.Env = append(os.Environ(), mode.env...)
				cmd.Stdin = strings.NewReader(stdin)
				out, err := cmd.CombinedOutput()
				var exitErr *exec.ExitError
				if errors.As(err, &exitErr) {
					return string(out), exitErr.ExitCode()
				}
				if err != nil {
					t.Fatalf("kubectl %v: %v", args, err)
				}
				return string(out), 0
			}
			out, code := run("", "exec", "shell", "--", "sh", "-c", "echo out-line; echo err-line >&2; exit 3")
			if code != 3 || !strings.Contains(out, "out-line") || !strings.Contains(out, "err-line") {
				t.Fatalf("exec exit code %d (want 3):\n%s\ndaemon:\n%s", code, out, b.Log())
			}
			if out, code := run("piped-input\n", "exec", "-i", "shell", "--", "cat"); code != 0 || !strings.Contains(out, "piped-input") {
				t.Fatalf("exec -i cat: %d\n%s", code, out)
			}
			// fsGroup and the secret, seen from inside.
			if out, code := run("", "exec", "shell", "--", "sh", "-c", "cat /etc/s/token; echo; stat -L -c %g /etc/s/token"); code != 0 || !strings.Contains(out, "s3cr3t") || !strings.Contains(out, "4321") {
				t.Fatalf("secret volume with fsGroup 4321: %d\n%s", code, out)
			}
			// A terminal: `script` gives kubectl a pty, so -t is honoured.
			cmdline := fmt.Sprintf("%s %s --kubeconfig %s exec -it shell -- sh -c 'tty; echo cols=$(stty size)'", strings.Join(mode.env, " "), k.bin, k.kubeconfig)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			tty, err := exec.CommandContext(ctx, "script", "-qec", cmdline, "/dev/null").CombinedOutput()
			cancel()
			if err != nil || !strings.Contains(string(tty), "/dev/pts/") {
				t.Fatalf("exec -it: %v\n%s", err, tty)
			}
			// attach: what we type reaches the container's stdin, its
			// output comes back.
			line := "hello-" + mode.name
			ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
			att := exec.CommandContext(ctx, k.bin, "--kubeconfig", k.kubeconfig, "attach", "-i", "reader")
			att.Env = append(os.Environ(), mode.env...)
			pr, pw := io.Pipe()
			att.Stdin = pr
			attOut := &lockedBuffer{}
			att.Stdout, att.Stderr = attOut, attOut
			if err := att.Start(); err != nil {
				t.Fatal(err)
			}
			Eventually(t, 15*time.Second, func() (bool, string) {
				_, _ = pw.Write([]byte(line + "\n"))
				return strings.Contains(attOut.String(), "got:"+line), "attach output:\n" + attOut.String()
			})
			cancel()
			pw.Close()
			_ = att.Wait()
			// port-forward into both network kinds.
			for _, pf := range []struct{ pod, port string }{{"podnet", "8080"}, {"hostnet", fmt.Sprint(hostPort)}} {
				local := freePort(t)
				ctx, cancel := context.WithCancel(context.Background())
				fwd := exec.CommandContext(ctx, k.bin, "--kubeconfig", k.kubeconfig, "port-forward", "pod/"+pf.pod, fmt.Sprintf("%d:%s", local, pf.port))
				fwd.Env = append(os.Environ(), mode.env...)
				fwdOut := &lockedBuffer{}
				fwd.Stdout, fwd.Stderr = fwdOut, fwdOut
				if err := fwd.Start(); err != nil {
					t.Fatal(err)
				}
				Eventually(t, 20*time.Second, func() (bool, string) {
					return strings.Contains(fwdOut.String(), "Forwarding from"), fwdOut.String()
				})
				for i := 0; i < 3; i++ { // several connections through one forward
					resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/hostname", local))
					if err != nil {
						ctrd, _ := os.ReadFile(c.Socket + ".log")
						t.Fatalf("port-forward %s: %v\n%s\ndaemon:\n%s\ncontainerd (tail):\n%s", pf.pod, err, fwdOut.String(), b.Log(), tail(string(ctrd), 4000))
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || len(strings.TrimSpace(string(body))) == 0 {
						t.Fatalf("port-forward %s: %d %q", pf.pod, resp.StatusCode, body)
					}
				}
				cancel()
				_ = fwd.Wait()
			}
		})
	}
	// A read of a missing container and a plain (non-upgrade) request get a
	// Status, not a hang.
	if out, err := k.run(t, "", "exec", "shell", "-c", "nope", "--", "true"); err == nil || !strings.Contains(out, "container nope is not valid for pod shell") {
		t.Fatalf("exec into a missing container: %v\n%s", err, out)
	}
	// The secret volume is a tmpfs on the host, gone with the pod.
	uid := podUID(t, b, "shell")
	vol := filepath.Join(b.Dir, "pods", uid, "volumes", "kubernetes.io~secret", "s")
	if fs := mountFSType(t, vol); fs != "tmpfs" {
		t.Fatalf("secret volume %s is on %q, want tmpfs", vol, fs)
	}
	k.must(t, "", "delete", "pod", "shell", "--wait=true", "--timeout=60s")
	Eventually(t, 10*time.Second, func() (bool, string) {
		return mountFSType(t, vol) == "", "secret tmpfs still mounted after delete"
	})
}

func mountFSType(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	fs := ""
	for sc.Scan() {
		if p := strings.Fields(sc.Text()); len(p) > 2 && p[1] == path {
			fs = p[2]
		}
	}
	return fs
}

// TestContainerLogLinksAndLogOptions: the kubelet's /var/log/containers
// links follow the containers, and kubectl logs --since, --limit-bytes and
// --previous work.
func TestContainerLogLinksAndLogOptions(t *testing.T) {
	c := StartContainerd(t)
	b := StartBootlet(t, c, "--listen", "127.0.0.1:0")
	k := newKubectlEnv(t, b)
	k.must(t, `
apiVersion: v1
kind: Pod
metadata: {name: logger}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "echo early-$(cat /proc/sys/kernel/random/uuid); sleep 4; echo late-line; sleep 3; exit 1"]
`, "create", "-f", "-")
	// The link of the running container, named as the kubelet's.
	linkRe := regexp.MustCompile(`^logger-` + b.NodeName + `_default_main-[0-9a-f]{64}\.log$`)
	var first string
	Eventually(t, 30*time.Second, func() (bool, string) {
		entries, _ := os.ReadDir(b.ContainerLogDir())
		for _, e := range entries {
			if linkRe.MatchString(e.Name()) {
				first = e.Name()
				target, err := os.Readlink(filepath.Join(b.ContainerLogDir(), e.Name()))
				return err == nil && strings.HasPrefix(target, b.LogDir) && strings.HasSuffix(target, "main/0.log"), target
			}
		}
		return false, fmt.Sprintf("no link in %s: %v", b.ContainerLogDir(), entries)
	})
	Eventually(t, 20*time.Second, func() (bool, string) {
		out, _ := k.run(t, "", "logs", "logger")
		return strings.Contains(out, "late-line"), out
	})
	// --since=2s: only what came in the last two seconds (the late line,
	// written ~4 s after the early one).
	if out := k.must(t, "", "logs", "logger", "--since=2s"); strings.Contains(out, "early-") || !strings.Contains(out, "late-line") {
		if out2 := k.must(t, "", "logs", "logger", "--since=1h"); !strings.Contains(out2, "early-") {
			t.Fatalf("--since=1h lost the early line:\n%s", out2)
		}
		t.Fatalf("--since=2s:\n%s", out)
	}
	if out := k.must(t, "", "logs", "logger", "--limit-bytes=5"); out != "early" {
		t.Fatalf("--limit-bytes=5: %q", out)
	}
	// After the restart: --previous is the first run, the current one a
	// new run; the first run's link stays while its container is kept.
	var prev string
	Eventually(t, 40*time.Second, func() (bool, string) {
		out, err := k.run(t, "", "logs", "logger", "--previous")
		prev = out
		return err == nil && strings.Contains(out, "early-"), out
	})
	Eventually(t, 20*time.Second, func() (bool, string) {
		cur, err := k.run(t, "", "logs", "logger")
		return err == nil && strings.Contains(cur, "early-") && firstLine(cur) != firstLine(prev), "current:\n" + cur + "\nprevious:\n" + prev
	})
	Eventually(t, 20*time.Second, func() (bool, string) {
		entries, _ := os.ReadDir(b.ContainerLogDir())
		n := 0
		for _, e := range entries {
			if linkRe.MatchString(e.Name()) {
				n++
			}
		}
		return n >= 2, fmt.Sprintf("links: %v (first %s)", entries, first)
	})
	k.must(t, "", "delete", "pod", "logger", "--wait=true", "--timeout=60s")
	entries, _ := os.ReadDir(b.ContainerLogDir())
	if len(entries) != 0 {
		t.Fatalf("links left after the pod was deleted: %v", entries)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
