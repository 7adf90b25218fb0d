//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// kubectlEnv is a kubeconfig from `bootlet kubeconfig` for the TCP (mTLS)
// listener, and the real kubectl.
type kubectlEnv struct {
	b          *Bootlet
	kubeconfig string
	bin        string
}

func newKubectlEnv(t *testing.T, b *Bootlet) *kubectlEnv {
	t.Helper()
	out, err := b.CLI(t, "kubeconfig")
	if err != nil || !strings.Contains(out, "client-certificate-data") {
		t.Fatalf("bootlet kubeconfig: %v\n%s", err, out)
	}
	kc := filepath.Join(b.Ctrd.Dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return &kubectlEnv{b: b, kubeconfig: kc, bin: Bin(t, "kubectl")}
}

func (k *kubectlEnv) run(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return out.String(), err
}

func (k *kubectlEnv) must(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := k.run(t, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s\ndaemon log:\n%s", strings.Join(args, " "), err, out, k.b.Log())
	}
	return out
}

// lockedBuffer collects a background command's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const kubectlPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: docker.io/library/busybox:1.36
    command: ["sh", "-c", "echo greeting=$GREETING; cat /etc/s/token; echo; exec sleep 3600"]
    env:
    - name: GREETING
      valueFrom: {configMapKeyRef: {name: greetings, key: greeting}}
    volumeMounts:
    - {name: s, mountPath: /etc/s}
  volumes:
  - name: s
    secret: {secretName: creds}
`

// TestKubectl drives the daemon with the real kubectl over TCP + mTLS, with
// the kubeconfig `bootlet kubeconfig` prints.
func TestKubectl(t *testing.T) {
	c := StartContainerd(t)
	b := StartBootlet(t, c, "--listen", "127.0.0.1:0")
	k := newKubectlEnv(t, b)

	if out := k.must(t, "", "version"); !strings.Contains(out, "Server Version: v1.36.3") {
		t.Fatalf("version: %s", out)
	}
	// Watch from the start: every change of the pod must show up.
	watchOut := &lockedBuffer{}
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	watch := exec.CommandContext(wctx, k.bin, "--kubeconfig", k.kubeconfig, "get", "pods", "-w", "--output-watch-events")
	watch.Stdout, watch.Stderr = watchOut, watchOut
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { wcancel(); _ = watch.Wait() }()

	k.must(t, "", "create", "secret", "generic", "creds", "--from-literal=token=s3cr3t")
	k.must(t, "", "create", "configmap", "greetings", "--from-literal=greeting=hello")
	k.must(t, kubectlPod, "create", "-f", "-")
	k.must(t, "", "wait", "--for=condition=Ready", "pod/web", "--timeout=90s")

	if out := k.must(t, "", "get", "pods", "-A"); !strings.Contains(out, "default") || !strings.Contains(out, "web") || !strings.Contains(out, "Running") || !strings.Contains(out, "1/1") {
		t.Fatalf("get -A:\n%s", out)
	}
	if out := k.must(t, "", "get", "pod", "web", "-o", "yaml", "--show-managed-fields"); !strings.Contains(out, "kind: Pod") || !strings.Contains(out, "phase: Running") || !strings.Contains(out, "manager: kubectl-create") {
		t.Fatalf("get -o yaml:\n%s", out)
	}
	if out := k.must(t, "", "get", "pods", "-L", "app"); !strings.Contains(out, "APP") || !strings.Contains(out, "web") {
		t.Fatalf("get -L app:\n%s", out)
	}
	Eventually(t, 20*time.Second, func() (bool, string) {
		out, _ := k.run(t, "", "logs", "web")
		return strings.Contains(out, "greeting=hello") && strings.Contains(out, "s3cr3t"), out
	})
	if out := k.must(t, "", "describe", "pod", "web"); !strings.Contains(out, "Events:") || !strings.Contains(out, "Started") || !strings.Contains(out, "Reason   Age") {
		t.Fatalf("describe:\n%s", out)
	}
	if out, err := b.CLI(t, "describe", "pod", "web"); err != nil || !strings.Contains(out, "Events:") || !strings.Contains(out, "Started") {
		t.Fatalf("bootlet describe pod: %v\n%s", err, out)
	}
	if out := k.must(t, "", "explain", "pod.spec.containers.image"); !strings.Contains(out, "FIELD: image <string>") {
		t.Fatalf("explain:\n%s", out)
	}
	k.must(t, "", "label", "pod", "web", "tier=front")
	k.must(t, "", "patch", "pod", "web", "-p", `{"metadata":{"labels":{"patched":"strategic"}}}`)
	k.must(t, "", "patch", "pod", "web", "--type", "merge", "-p", `{"metadata":{"annotations":{"patched":"merge"}}}`)
	k.must(t, "", "patch", "pod", "web", "--type", "json", "-p", `[{"op":"add","path":"/metadata/labels/json","value":"yes"}]`)
	if out := k.must(t, "", "get", "pod", "web", "-o", "jsonpath={.metadata.labels.tier},{.metadata.labels.patched},{.metadata.annotations.patched},{.metadata.labels.json}"); out != "front,strategic,merge,yes" {
		t.Fatalf("label/patch: %q", out)
	}
	// Strict field validation (kubectl's default) names the unknown field.
	bad := strings.Replace(kubectlPod, "terminationGracePeriodSeconds: 2", "terminationGracePeriodSeconds: 2\n  foo: bar", 1)
	if out, err := k.run(t, strings.Replace(bad, "name: web", "name: web2", 1), "create", "-f", "-"); err == nil || !strings.Contains(out, `unknown field "spec.foo"`) {
		t.Fatalf("create with unknown field: %v\n%s", err, out)
	}
	// Client-side apply: create, then change.
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: applied}\ndata: {a: \"1\"}\n"
	k.must(t, cm, "apply", "-f", "-")
	k.must(t, strings.Replace(cm, `"1"`, `"2"`, 1), "apply", "-f", "-")
	if out := k.must(t, "", "get", "cm", "applied", "-o", "jsonpath={.data.a}"); out != "2" {
		t.Fatalf("apply: %q", out)
	}
	// Server-side apply of the manifest kubectl created: no conflict.
	k.must(t, kubectlPod, "apply", "--server-side", "-f", "-")
	if out := k.must(t, "", "get", "pod", "web", "-o", "yaml", "--show-managed-fields"); !strings.Contains(out, "operation: Apply") || !strings.Contains(out, "manager: kubectl") {
		t.Fatalf("managedFields after apply --server-side:\n%s", out)
	}
	// Server-side apply conflict with another manager.
	if out, err := k.run(t, strings.Replace(cm, `"1"`, `"3"`, 1), "apply", "--server-side", "--field-manager=other", "-f", "-"); err == nil || !strings.Contains(strings.ToLower(out), "conflict") {
		t.Fatalf("apply --server-side conflict: %v\n%s", err, out)
	}
	// replace with a stale resourceVersion: 409.
	cur := k.must(t, "", "get", "pod", "web", "-o", "yaml")
	stale := replaceLine(cur, "  resourceVersion: ", `  resourceVersion: "1"`)
	if out, err := k.run(t, stale, "replace", "-f", "-"); err == nil || !strings.Contains(out, "the object has been modified") {
		t.Fatalf("replace with stale resourceVersion: %v\n%s", err, out)
	}
	k.must(t, "", "delete", "pod", "web", "--wait=true", "--timeout=60s")
	if out, err := k.run(t, "", "get", "pod", "web"); err == nil || !strings.Contains(out, "NotFound") {
		t.Fatalf("pod still there after delete --wait: %s", out)
	}
	Eventually(t, 10*time.Second, func() (bool, string) {
		out := watchOut.String()
		return strings.Contains(out, "ADDED") && strings.Contains(out, "MODIFIED") && strings.Contains(out, "DELETED"), "kubectl get -w output:\n" + out
	})
}

func replaceLine(doc, prefix, with string) string {
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			lines[i] = with
			break
		}
	}
	return strings.Join(lines, "\n")
}
