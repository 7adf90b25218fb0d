package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/types"
)

const header = "apiVersion: bootlet.dev/v1alpha1\nkind: BootletConfiguration\n"

// The file format shares its group and version with the checkpoint
// records: one bootlet.dev/v1alpha1.
func TestGroupVersionIsBootlets(t *testing.T) {
	if got := SchemeGroupVersion.String(); got != types.CheckpointAPIVersion {
		t.Errorf("apiVersion %s, the checkpoints' is %s", got, types.CheckpointAPIVersion)
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		wantErr  []string // substrings, all of them
		strict   bool     // a runtime.StrictDecodingError
		check    func(*BootletConfiguration) bool
	}{
		{name: "header only is all defaults", in: header,
			check: func(c *BootletConfiguration) bool { return reflect.DeepEqual(c, Defaults()) }},
		{name: "JSON", in: `{"apiVersion":"bootlet.dev/v1alpha1","kind":"BootletConfiguration","rootDir":"/srv/bootlet"}`,
			check: func(c *BootletConfiguration) bool { return c.RootDir == "/srv/bootlet" }},
		{name: "nested fields and durations", in: header + "listen:\n  address: 0.0.0.0:10443\nlimits:\n  requestTimeout: 90s\ncheckpointer:\n  activateAfter: 1m30s\n",
			check: func(c *BootletConfiguration) bool {
				return c.Listen.Address == "0.0.0.0:10443" && c.Limits.RequestTimeout.Duration == 90*time.Second &&
					c.Checkpointer.ActivateAfter.Duration == 90*time.Second
			}},
		// 0s turns the checkpointer's fast path after a restart off: a file
		// that says so must not get the default back.
		{name: "0s checkpointer durations are kept", in: header + "checkpointer:\n  activateAfter: 0s\n  activateAfterStart: 0s\n  withdrawAfter: 0s\n",
			check: func(c *BootletConfiguration) bool {
				return c.Checkpointer.ActivateAfter.Duration == 0 && c.Checkpointer.ActivateAfterStart.Duration == 0 &&
					c.Checkpointer.WithdrawAfter.Duration == 0
			}},
		{name: "a second document is refused", in: header + "rootDir: /a\n---\n" + header + "rootDir: /b\n",
			wantErr: []string{"2 YAML documents"}},
		{name: "a leading separator and a trailing comment are one document", in: "---\n" + header + "rootDir: /a\n---\n# end\n",
			check: func(c *BootletConfiguration) bool { return c.RootDir == "/a" }},
		{name: "every unknown field is named, with its path", in: header + "foo: 1\nlisten:\n  tlsCertFil: /x\n",
			strict: true, wantErr: []string{`unknown field "foo"`, `unknown field "listen.tlsCertFil"`}},
		// encoding/json would take RootDir for rootDir; apimachinery's
		// strict decoding does not, and neither does bootlet.
		{name: "field names are case-sensitive", in: header + "RootDir: /x\n",
			strict: true, wantErr: []string{`unknown field "RootDir"`}},
		{name: "duplicate key", in: header + "rootDir: /a\nrootDir: /b\n",
			strict: true, wantErr: []string{`"rootDir" already set`}},
		{name: "wrong kind", in: "apiVersion: bootlet.dev/v1alpha1\nkind: KubeletConfiguration\n",
			wantErr: []string{`kind "KubeletConfiguration"`, "want apiVersion bootlet.dev/v1alpha1, kind BootletConfiguration"}},
		{name: "wrong apiVersion", in: "apiVersion: bootlet.dev/v1\nkind: BootletConfiguration\n",
			wantErr: []string{`apiVersion "bootlet.dev/v1"`}},
		{name: "empty file", in: "", wantErr: []string{`apiVersion "", kind ""`}},
		{name: "bad duration names its field", in: header + "checkpointer:\n  activateAfter: 10 seconds\n",
			wantErr: []string{`checkpointer.activateAfter: Invalid value: "10 seconds"`, "unknown unit"}},
		{name: "a number is not a duration", in: header + "limits:\n  requestTimeout: 60\n",
			wantErr: []string{`limits.requestTimeout: Invalid value: 60`, `such as "10s"`}},
		{name: "wrong type names its field", in: header + "limits:\n  maxPods: many\n",
			wantErr: []string{"limits.maxPods", "int32"}},
		{name: "not YAML", in: header + "rootDir: [\n", wantErr: []string{"yaml"}},
		{name: "relative paths are the file's directory's", in: header + "rootDir: state\nmanifestsDir: ../manifests\nsocket: /run/b.sock\nhandoff:\n  kubeletStaticPodPath: static\n",
			check: func(c *BootletConfiguration) bool {
				return c.RootDir == "/etc/bootlet/state" && c.ManifestsDir == "/etc/manifests" && c.Socket == "/run/b.sock" &&
					*c.Handoff.KubeletStaticPodPath == "/etc/bootlet/static"
			}},
		{name: "a URL is not a path", in: header + "handoff:\n  kubeletHealthzURL: http://127.0.0.1:10248/healthz\n",
			check: func(c *BootletConfiguration) bool { return *c.Handoff.KubeletHealthzURL == DefaultKubeletHealthzURL }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode([]byte(tc.in), "/etc/bootlet")
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if !tc.check(c) {
					t.Errorf("decoded %+v", c)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode succeeded, want an error with %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if got := runtime.IsStrictDecodingError(err); got != tc.strict {
				t.Errorf("IsStrictDecodingError = %v, want %v (%v)", got, tc.strict, err)
			}
		})
	}
}

func TestSetDefaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		check func(*BootletConfiguration) bool
	}{
		{"unset is the default", "",
			func(c *BootletConfiguration) bool {
				return c.RuntimeEndpoint == DefaultRuntimeEndpoint && *c.ContainerLogDir == DefaultContainerLogDir &&
					*c.Handoff.KubeletHealthzURL == DefaultKubeletHealthzURL && *c.Limits.MaxPods == DefaultMaxPods &&
					c.Checkpointer.WithdrawAfter.Duration == DefaultWithdrawAfter && *c.ReleaseStartupPages &&
					reflect.DeepEqual(c.Listen.AdminGroups, []string{DefaultAdminGroup}) &&
					reflect.DeepEqual(c.Checkpointer.Namespaces, []string{"kube-system"})
			}},
		// The zero values that mean something survive defaulting.
		{"empty healthz URL turns the handoff off", "handoff:\n  kubeletHealthzURL: \"\"\n",
			func(c *BootletConfiguration) bool { return *c.Handoff.KubeletHealthzURL == "" }},
		{"empty container log dir: no links", "containerLogDir: \"\"\n",
			func(c *BootletConfiguration) bool { return *c.ContainerLogDir == "" }},
		{"0 lifts a limit", "limits:\n  maxPods: 0\n  requestTimeout: 0s\n",
			func(c *BootletConfiguration) bool {
				return *c.Limits.MaxPods == 0 && c.Limits.RequestTimeout.Duration == 0
			}},
		{"0s turns the hand-over off", "apiserverHandoverDrain: 0s\n",
			func(c *BootletConfiguration) bool { return c.APIServerHandoverDrain.Duration == 0 }},
		{"false stays false", "releaseStartupPages: false\npivot:\n  tcpMigrateReq: false\n",
			func(c *BootletConfiguration) bool { return !*c.ReleaseStartupPages && !*c.Pivot.TCPMigrateReq }},
		{"[] grants nobody", "listen:\n  adminGroups: []\n",
			func(c *BootletConfiguration) bool {
				return c.Listen.AdminGroups != nil && len(c.Listen.AdminGroups) == 0
			}},
		{"null is unset", "listen:\n  adminGroups: null\n",
			func(c *BootletConfiguration) bool {
				return reflect.DeepEqual(c.Listen.AdminGroups, []string{DefaultAdminGroup})
			}},
		{"a set value is kept", "cgroupDriver: systemd\nlimits:\n  maxWatches: 7\n",
			func(c *BootletConfiguration) bool { return c.CgroupDriver == "systemd" && *c.Limits.MaxWatches == 7 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode([]byte(header+tc.in), "/")
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("defaulted %+v", c)
			}
		})
	}
}

// Defaults must not share slices or pointers between two calls: a caller
// that edits one must not change the next.
func TestDefaultsAreFresh(t *testing.T) {
	a := Defaults()
	a.Listen.AdminGroups[0] = "changed"
	*a.Limits.MaxPods = 1
	if b := Defaults(); b.Listen.AdminGroups[0] != DefaultAdminGroup || *b.Limits.MaxPods != DefaultMaxPods {
		t.Errorf("Defaults shares state: %v %d", b.Listen.AdminGroups, *b.Limits.MaxPods)
	}
}

// What Encode prints is a complete file that decodes to the same
// configuration: what `bootlet daemon --write-config-to` relies on.
func TestEncodeRoundTrip(t *testing.T) {
	c := Defaults()
	c.Listen.ReaderGroups = []string{}
	c.Handoff.KubeletHealthzURL = ptr.To("")
	out, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(out, "/")
	if err != nil {
		t.Fatalf("Decode(Encode): %v\n%s", err, out)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip changed the configuration:\n%s", out)
	}
	for _, f := range []string{"podRootDir: \"\"", "kubeconfig: \"\"", "maxStreamsPerUser: 10", "withdrawAfter: 20s"} {
		if !strings.Contains(string(out), f) {
			t.Errorf("encoded file lacks %q:\n%s", f, out)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*BootletConfiguration)
		want   []string // the errors' "path: type" prefixes, in order
	}{
		{"defaults are valid", func(*BootletConfiguration) {}, nil},
		{"runtime endpoint is a unix URL or an absolute path", func(c *BootletConfiguration) { c.RuntimeEndpoint = "tcp://127.0.0.1:1" },
			[]string{"runtimeEndpoint: Invalid value"}},
		{"a relative runtime endpoint", func(c *BootletConfiguration) { c.RuntimeEndpoint = "containerd.sock" },
			[]string{"runtimeEndpoint: Invalid value"}},
		// cri.Connect takes a bare path as the flag does: the file must too.
		{"a bare absolute runtime endpoint is valid", func(c *BootletConfiguration) { c.RuntimeEndpoint = "/run/containerd/containerd.sock" },
			nil},
		{"runtime endpoint has a path", func(c *BootletConfiguration) { c.RuntimeEndpoint = "unix://" },
			[]string{"runtimeEndpoint: Invalid value"}},
		{"required paths", func(c *BootletConfiguration) { c.RootDir, c.PodLogDir, c.Socket = "", "", "" },
			[]string{"rootDir: Required value", "podLogDir: Required value", "socket: Required value"}},
		{"cgroup driver", func(c *BootletConfiguration) { c.CgroupDriver = "cgroupv2" },
			[]string{`cgroupDriver: Unsupported value: "cgroupv2": supported values: "cgroupfs", "systemd"`}},
		{"read-only socket is another socket", func(c *BootletConfiguration) { c.ReadOnlySocket = c.Socket },
			[]string{"readOnlySocket: Invalid value"}},
		{"read-only socket group needs the socket", func(c *BootletConfiguration) { c.ReadOnlySocketGroup = "monitoring" },
			[]string{"readOnlySocketGroup: Invalid value"}},
		{"negative durations", func(c *BootletConfiguration) {
			c.FsyncReadyTimeout.Duration, c.APIServerHandoverDrain.Duration, c.Limits.RequestTimeout.Duration = -1, -1, -1
			c.Checkpointer.ActivateAfter.Duration, c.Checkpointer.ActivateAfterStart.Duration, c.Checkpointer.WithdrawAfter.Duration = -1, -1, -1
		}, []string{"fsyncReadyTimeout: Invalid value", "apiserverHandoverDrain: Invalid value", "limits.requestTimeout: Invalid value",
			"checkpointer.activateAfter: Invalid value", "checkpointer.activateAfterStart: Invalid value", "checkpointer.withdrawAfter: Invalid value"}},
		{"kubeconfig validity is positive", func(c *BootletConfiguration) { c.KubeconfigMaxValidity.Duration = -time.Hour },
			[]string{"kubeconfigMaxValidity: Invalid value"}},
		{"a master's dead-after is positive", func(c *BootletConfiguration) { c.Pivot.MasterDeadAfter.Duration = 0 },
			[]string{"pivot.masterDeadAfter: Invalid value"}},
		{"listen address is HOST:PORT", func(c *BootletConfiguration) { c.Listen.Address = "10.0.0.1" },
			[]string{"listen.address: Invalid value"}},
		{"listen port is a port", func(c *BootletConfiguration) { c.Listen.Address = ":https" },
			[]string{"listen.address: Invalid value"}},
		{"listen on any address, port 0", func(c *BootletConfiguration) { c.Listen.Address = ":0" }, nil},
		{"certificate needs its key", func(c *BootletConfiguration) { c.Listen.TLSCertFile = "/pki/b.crt" },
			[]string{"listen.tlsPrivateKeyFile: Required value"}},
		{"key needs its certificate", func(c *BootletConfiguration) { c.Listen.TLSPrivateKeyFile = "/pki/b.key" },
			[]string{"listen.tlsCertFile: Required value"}},
		{"client CA key needs the client CA", func(c *BootletConfiguration) { c.Listen.ClientCAKeyFile = "/pki/ca.key" },
			[]string{"listen.clientCAFile: Required value"}},
		{"empty groups", func(c *BootletConfiguration) {
			c.Listen.AdminGroups = []string{"system:masters", ""}
			c.Listen.ReaderGroups = []string{" "}
			c.PodSecurity.ExemptGroups = []string{""}
		}, []string{"listen.adminGroups[1]: Invalid value", "listen.readerGroups[0]: Invalid value", "podSecurity.exemptGroups[0]: Invalid value"}},
		{"pod security level", func(c *BootletConfiguration) { c.PodSecurity.Level = "strict" },
			[]string{`podSecurity.level: Unsupported value: "strict"`}},
		{"pod security restricted", func(c *BootletConfiguration) { c.PodSecurity.Level = "restricted" }, nil},
		{"negative limits", func(c *BootletConfiguration) {
			for _, p := range []*int32{c.Limits.MaxPods, c.Limits.MaxRequestsInFlight, c.Limits.MaxRequestsInFlightPerUser,
				c.Limits.MaxWatches, c.Limits.MaxWatchesPerUser, c.Limits.MaxStreams, c.Limits.MaxStreamsPerUser} {
				*p = -1
			}
		}, []string{"limits.maxPods: Invalid value", "limits.maxRequestsInFlight: Invalid value", "limits.maxRequestsInFlightPerUser: Invalid value",
			"limits.maxWatches: Invalid value", "limits.maxWatchesPerUser: Invalid value", "limits.maxStreams: Invalid value", "limits.maxStreamsPerUser: Invalid value"}},
		{"kubelet healthz is an http URL", func(c *BootletConfiguration) { c.Handoff.KubeletHealthzURL = ptr.To("127.0.0.1:10248/healthz") },
			[]string{"handoff.kubeletHealthzURL: Invalid value"}},
		{"handoff needs the kubelet's root dir", func(c *BootletConfiguration) { c.Handoff.KubeletRootDir = "" },
			[]string{"handoff.kubeletRootDir: Required value"}},
		{"no handoff, no kubelet root dir needed", func(c *BootletConfiguration) {
			c.Handoff.KubeletRootDir, c.Handoff.KubeletHealthzURL = "", ptr.To("")
		}, nil},
		{"self-hosted assets need the pivot", func(c *BootletConfiguration) { c.Pivot.SelfHostedAssets = "/etc/kubernetes/self-hosted" },
			[]string{"pivot.kubeconfig: Required value"}},
		{"checkpoint namespaces", func(c *BootletConfiguration) {
			c.Checkpointer.Namespaces = []string{"kube-system", "Kube_System", "kube-system"}
		},
			[]string{"checkpointer.namespaces[1]: Invalid value", "checkpointer.namespaces[2]: Duplicate value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.modify(c)
			errs := Validate(c)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tc.want), errs)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to start with %q", i, errs[i].Error(), w)
				}
			}
			if len(errs) > 0 && !strings.Contains(errs.ToAggregate().Error(), errs[0].Error()) {
				t.Errorf("aggregate %q lacks %q", errs.ToAggregate(), errs[0])
			}
		})
	}
}

// The example in the docs is a file the daemon accepts.
func TestExampleDecodesAndValidates(t *testing.T) {
	path := filepath.Join("..", "docs", "examples", "bootlet-config.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decode(data, "/etc/bootlet")
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if errs := Validate(c); len(errs) > 0 {
		t.Fatalf("%s: %v", path, errs.ToAggregate())
	}
	if reflect.DeepEqual(c, Defaults()) {
		t.Errorf("%s sets nothing: an example should show a change from the defaults", path)
	}
}
