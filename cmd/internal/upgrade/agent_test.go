package upgrade

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cmd/internal/clitest"
	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/upgrade/nodeagent"
)

// distDir is dist/systemd, the units make install puts on a node.
var distDir = filepath.Join("..", "..", "..", "dist", "systemd")

// execStart is the unit's ExecStart= split at spaces, its continuation
// lines joined.
func execStart(t *testing.T, unit string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(distDir, unit))
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.ReplaceAll(string(data), "\\\n", " ")
	m := regexp.MustCompile(`(?m)^ExecStart=(.*)$`).FindAllStringSubmatch(joined, -1)
	if len(m) != 1 {
		t.Fatalf("%s: %d ExecStart= lines, want one", unit, len(m))
	}
	return strings.Fields(m[0][1])
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// defaults are the agent verb's flag defaults, by name.
func defaults(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range []string{"node-name", "kubeconfig", "runtime-endpoint", "kubelet-binary", "kubelet-restart-command", "checkpointer-kubeconfig"} {
		f := newAgentCommand().Flags().Lookup(n)
		if f == nil {
			t.Fatalf("upgrade agent has no --%s", n)
		}
		out[n] = f.DefValue
	}
	return out
}

// TestAgentDefaultsAreAWorkers: bootlet-upgrade-agent.service passes only
// the kubelet's file (which make install's PREFIX moves), so the verb's
// other defaults must be the worker's files as make install lays them out:
// the kubeconfig of bootlet-kubelet-worker.service, a restart of that
// unit, and the socket bootlet-containerd.service serves; and the file it
// names, and the default, are the one that unit runs.
func TestAgentDefaultsAreAWorkers(t *testing.T) {
	def := defaults(t)
	agent := execStart(t, "bootlet-upgrade-agent.service")
	const workerUnit = "bootlet-kubelet-worker.service"
	kubelet := execStart(t, workerUnit)
	if want := []string{"/usr/local/bin/bootlet", "upgrade", "agent", "--kubelet-binary", kubelet[0], "$UPGRADE_AGENT_ARGS"}; !reflect.DeepEqual(agent, want) {
		t.Errorf("bootlet-upgrade-agent.service: ExecStart=%q, want %q: the defaults below are the unit's settings", agent, want)
	}
	if def["kubelet-binary"] != kubelet[0] {
		t.Errorf("--kubelet-binary %s, %s runs %s", def["kubelet-binary"], workerUnit, kubelet[0])
	}
	if got := flagValue(kubelet, "kubeconfig"); def["kubeconfig"] != got {
		t.Errorf("--kubeconfig %s, %s's kubelet writes %s", def["kubeconfig"], workerUnit, got)
	}
	restart := strings.Fields(def["kubelet-restart-command"])
	if want := []string{"systemctl", "restart", workerUnit}; !reflect.DeepEqual(restart, want) {
		t.Errorf("--kubelet-restart-command %q, want %q", restart, want)
	}
	toml, err := os.ReadFile(filepath.Join(distDir, "containerd.toml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\[grpc\]\n\s*address = "([^"]+)"`).FindSubmatch(toml)
	if m == nil {
		t.Fatal("containerd.toml: no [grpc] address")
	}
	if want := "unix://" + string(m[1]); def["runtime-endpoint"] != want {
		t.Errorf("--runtime-endpoint %s, bootlet-containerd.service serves %s", def["runtime-endpoint"], want)
	}
	// A master's bootlet reads the identity render writes there
	// (/etc/default/bootlet's asset dir, the units' /etc/kubernetes).
	if want := filepath.Join("/etc/kubernetes", manifests.CheckpointerKubeconfig); def["checkpointer-kubeconfig"] != want {
		t.Errorf("--checkpointer-kubeconfig %s, render writes a master's at %s", def["checkpointer-kubeconfig"], want)
	}
	if def["node-name"] == "" || def["node-name"] != strings.ToLower(def["node-name"]) {
		t.Errorf("--node-name default %q: the kubelet registers under the lower-cased host name", def["node-name"])
	}
}

// TestAgentConfig: the flags become the node agent's configuration, the
// restart command split at spaces, and a flag that would leave the agent
// unable to act is refused before it starts.
func TestAgentConfig(t *testing.T) {
	o := agentOptions{nodeName: "w1", kubeconfig: "/k.conf", runtimeEndpoint: "unix:///c.sock", kubeletBinary: "/bin/kubelet",
		restartCommand: " systemctl  restart kubelet.service "}
	got, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	want := nodeagent.Config{NodeName: "w1", Kubeconfig: "/k.conf", RuntimeAddress: "unix:///c.sock", KubeletBinary: "/bin/kubelet",
		RestartCommand: []string{"systemctl", "restart", "kubelet.service"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config %+v, want %+v", got, want)
	}

	cmds := func(*string) []*cobra.Command { return []*cobra.Command{NewCommand()} }
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"upgrade", "agent", "--node-name="}, "--node-name is empty"},
		{[]string{"upgrade", "agent", "--kubelet-binary="}, "--kubelet-binary is empty"},
		{[]string{"upgrade", "agent", "--kubelet-restart-command= "}, "--kubelet-restart-command is empty"},
		{[]string{"upgrade", "agent", "--checkpointer-kubeconfig="}, "--checkpointer-kubeconfig is empty"},
		{[]string{"upgrade", "agent", "--etcd-pki-dir="}, "--etcd-pki-dir is empty"},
		{[]string{"upgrade", "agent", "extra"}, "unknown command"},
	} {
		_, err := clitest.Run(t, cmds, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.wantErr)
		}
	}
}

// TestAgentWaitsForItsKubeconfig: on a worker the unit may start before
// the kubelet has written kubelet.conf; the agent waits for the file
// rather than failing, and returns once its context ends.
func TestAgentWaitsForItsKubeconfig(t *testing.T) {
	cmd := newAgentCommand()
	cmd.SetArgs([]string{"--node-name", "w1", "--kubeconfig", filepath.Join(t.TempDir(), "kubelet.conf")})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	select {
	case err := <-done:
		if ctx.Err() == nil {
			t.Fatalf("the agent returned before its context ended: %v", err)
		}
		if err != nil {
			t.Errorf("the agent without its kubeconfig: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not return after its context ended")
	}
}
