package status

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/nodephase"
	"github.com/bootlet/bootlet/pivot"
	"github.com/bootlet/bootlet/podapi"
	"github.com/bootlet/bootlet/podapi/podclient"
	btypes "github.com/bootlet/bootlet/types"
)

// nopRuntime runs nothing: the status test needs the registry, not pods.
type nopRuntime struct{}

func (nopRuntime) Sync(*v1.Pod)                                                      {}
func (nopRuntime) Terminate(types.UID, time.Duration) bool                           { return true }
func (nopRuntime) Refresh()                                                          {}
func (nopRuntime) Logs(context.Context, *v1.Pod, *v1.PodLogOptions, io.Writer) error { return nil }

// statusDaemon serves a real podapi server on a unix socket, wired to a
// NodePhaseSource as node.Run wires it, with a handoff and a pivot
// configured and a kubelet that answers.
func statusDaemon(t *testing.T) (*podapi.Server, *podapi.Registry, kubernetes.Interface, string) {
	t.Helper()
	dir := t.TempDir()
	store, err := checkpoint.Open(filepath.Join(dir, "root"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := podapi.NewRegistry("node1", store)
	if err != nil {
		t.Fatal(err)
	}
	reg.SetRuntime(nopRuntime{})
	srv := podapi.NewServer(reg)
	phase := &nodephase.Source{HandoffConfigured: true, PivotConfigured: true, Pods: reg.ListPods,
		KubeletUp: func() bool { return true }, PivotDoneFile: pivot.RecordPath(filepath.Join(dir, "root"))}
	srv.SetNodeStatus(phase.UpdateNode)
	sock := filepath.Join(dir, "b.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeUnix(ctx, sock, 0o600, -1) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	cs, err := podapi.NewClient("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := cs.Discovery().ServerVersion(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return srv, reg, cs, filepath.Join(dir, "root")
}

func createPod(t *testing.T, reg *podapi.Registry, ns, name string) *v1.Pod {
	t.Helper()
	p, err := reg.CreatePod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStatus(t *testing.T) {
	srv, reg, cs, root := statusDaemon(t)
	ctx := context.Background()
	etcd := createPod(t, reg, "kube-system", "etcd")
	createPod(t, reg, "kube-system", "kube-apiserver")
	reg.PodOwner(btypes.KeyOf(etcd), etcd.UID, btypes.OwnerKubeletStatic)

	// Recovery not done: everything is shown, and the command fails.
	var out bytes.Buffer
	if err := runStatus(ctx, cs, "", &out); err == nil || err.Error() != "not ready" {
		t.Fatalf("not ready: %v\n%s", err, &out)
	}
	if !strings.Contains(out.String(), "[-]recovery failed") || !strings.Contains(out.String(), "phase: handoff") {
		t.Fatalf("not ready output:\n%s", &out)
	}

	srv.SetReady()
	out.Reset()
	if err := runStatus(ctx, cs, "", &out); err != nil {
		t.Fatalf("%v\n%s", err, &out)
	}
	got := out.String()
	t.Log("\n" + got)
	for _, want := range []string{
		"server: v1.36.3-bootlet\n", "node: node1\n", "phase: handoff (for ",
		"reason: the kubelet answers; pods: 1 bootlet, 1 kubelet-static; pivot not complete\n",
		"NAMESPACE     NAME             READY   STATUS    RESTARTS   AGE   OWNER",
		"kube-system   etcd ", " kubelet-static\n", "kube-system   kube-apiserver ", " bootlet\n",
		"[+]recovery ok\n", "readyz check passed\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}

	// The pivot recorded: the daemon says self-hosted at the next request.
	if err := pivot.WriteDone(pivot.RecordPath(root), pivot.DoneRecord{CompletedAt: time.Now(), Components: []string{"kube-apiserver"}}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runStatus(ctx, cs, "yaml", &out); err != nil {
		t.Fatal(err)
	}
	var list v1.List
	if err := yaml.Unmarshal(out.Bytes(), &list); err != nil || list.Kind != "List" || len(list.Items) != 3 {
		t.Fatalf("yaml: %v\n%s", err, &out)
	}
	var node v1.Node
	if err := yaml.Unmarshal(list.Items[0].Raw, &node); err != nil || node.Kind != "Node" || node.Annotations[btypes.AnnotationPhase] != "self-hosted" {
		t.Fatalf("node: %v %+v", err, node)
	}
	var pod v1.Pod
	if err := yaml.Unmarshal(list.Items[1].Raw, &pod); err != nil || pod.Kind != "Pod" || pod.Name != "etcd" || btypes.OwnerOf(&pod) != btypes.OwnerKubeletStatic {
		t.Fatalf("pod: %v %+v", err, pod.ObjectMeta)
	}
	out.Reset()
	if err := runStatus(ctx, cs, "json", &out); err != nil || !strings.HasPrefix(out.String(), "{\n    \"kind\": \"List\"") {
		t.Fatalf("json: %v\n%s", err, &out)
	}
	if err := runStatus(ctx, cs, "wide", &out); err == nil || !strings.Contains(err.Error(), "yaml|json") {
		t.Fatalf("-o wide: %v", err)
	}

	// bootlet get nodes shows the same phase.
	out.Reset()
	nodes, err := podclient.Get(ctx, cs, podclient.Query{Resource: "nodes"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.PrintGet(nodes, "nodes", &cli.GetOptions{}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "NAME    STATUS   PHASE         AGE") || !strings.Contains(out.String(), "node1   Ready    self-hosted   ") {
		t.Fatalf("get nodes:\n%s", &out)
	}
}

func TestPrintPhase(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{btypes.AnnotationPhase: "checkpoint-active"}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Message: "not this"},
			{Type: btypes.NodeConditionPhase, Message: "checkpoint pod running", LastTransitionTime: metav1.NewTime(now.Add(-90 * time.Second))}}}}
	var out bytes.Buffer
	printPhase(n, now, &out)
	if want := "node: n\nphase: checkpoint-active (for 90s)\nreason: checkpoint pod running\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
	out.Reset()
	printPhase(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old"}}, now, &out)
	if want := "node: old\nphase: <unknown>\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}
