package daemon

import (
	goflag "flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/cmd/internal/clitest"
	"github.com/bootlet/bootlet/config"
	"github.com/bootlet/bootlet/internal/shellcmd"
)

// daemonFlags is the daemon command as bootlet builds it, with klog's flags.
func daemonFlags(t *testing.T) *pflag.FlagSet {
	t.Helper()
	root, cmd := &cobra.Command{Use: "bootlet"}, NewCommand(nil)
	root.AddCommand(cmd)
	cli.AddKlogFlags(root, cmd)
	return cmd.Flags()
}

// Every daemon flag is in the file or says why not, so a new flag cannot
// silently be missing from it; and no row names a flag that is gone.
func TestEveryDaemonFlagIsInTheFileOrFlagOnly(t *testing.T) {
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	mapped := map[string]bool{}
	for _, f := range configFields {
		if mapped[f.flag] {
			t.Errorf("--%s is mapped twice", f.flag)
		}
		mapped[f.flag] = true
		if _, flagOnly := configFlagOnly[f.flag]; flagOnly {
			t.Errorf("--%s is both mapped and flag-only", f.flag)
		}
	}
	fs := daemonFlags(t)
	fs.VisitAll(func(f *pflag.Flag) {
		_, flagOnly := configFlagOnly[f.Name]
		if !mapped[f.Name] && !flagOnly && klogFlags.Lookup(f.Name) == nil {
			t.Errorf("--%s has no field in BootletConfiguration: add it to configFields (and docs/configuration.md), or to configFlagOnly with the reason", f.Name)
		}
	})
	for name := range mapped {
		if fs.Lookup(name) == nil {
			t.Errorf("configFields maps --%s, which the daemon does not have", name)
		}
	}
	for name := range configFlagOnly {
		if fs.Lookup(name) == nil {
			t.Errorf("configFlagOnly lists --%s, which the daemon does not have", name)
		}
	}
}

// Every field of the file stands for exactly one flag: a field no flag
// maps would be decoded and then ignored.
func TestEveryFieldHasItsFlag(t *testing.T) {
	var paths []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" { // TypeMeta, inline
				continue
			}
			if f.Type.Kind() == reflect.Struct && strings.HasSuffix(f.Type.Name(), "Configuration") {
				walk(prefix+name+".", f.Type)
				continue
			}
			paths = append(paths, prefix+name)
		}
	}
	walk("", reflect.TypeOf(config.BootletConfiguration{}))
	var got []string
	for _, f := range configFields {
		got = append(got, f.path)
	}
	sort.Strings(paths)
	sort.Strings(got)
	if !reflect.DeepEqual(paths, got) {
		t.Errorf("fields of BootletConfiguration:\n  %v\nmapped to flags:\n  %v", paths, got)
	}
}

// The file's defaults are the flags' defaults, both ways: package config
// repeats the daemon packages' defaults, and this holds the copies equal.
func TestFileDefaultsAreTheFlagDefaults(t *testing.T) {
	flagDefaults := &daemonOptions{}
	daemonCmd(flagDefaults)

	fromFile := &daemonOptions{}
	daemonCmd(fromFile)
	for _, f := range configFields {
		f.fromFile(config.Defaults(), fromFile)
	}
	if !reflect.DeepEqual(fromFile, flagDefaults) {
		t.Errorf("the file's defaults differ from the flags':\nfile:  %+v\nflags: %+v", fromFile, flagDefaults)
	}

	toFile := &config.BootletConfiguration{}
	for _, f := range configFields {
		f.toFile(flagDefaults, toFile)
	}
	config.SetDefaults(toFile) // only the TypeMeta is left to set
	if want := config.Defaults(); !reflect.DeepEqual(toFile, want) {
		t.Errorf("the flags' defaults as a file differ from the file's defaults:\nflags: %+v\nfile:  %+v", toFile, want)
	}
}

func TestConfigPrecedence(t *testing.T) {
	const header = "apiVersion: bootlet.dev/v1alpha1\nkind: BootletConfiguration\n"
	for _, tc := range []struct {
		name    string
		file    string // "" : no --config
		args    []string
		check   func(*daemonOptions) bool
		wantErr string
	}{
		{name: "file over default", file: "rootDir: /srv/bootlet\nlimits:\n  maxPods: 50\n",
			check: func(o *daemonOptions) bool { return o.RootDir == "/srv/bootlet" && o.Limits.MaxPods == 50 }},
		{name: "flag over file", file: "rootDir: /srv/bootlet\n", args: []string{"--root-dir=/data/bootlet"},
			check: func(o *daemonOptions) bool { return o.RootDir == "/data/bootlet" }},
		{name: "a flag given with its default value still wins", file: "limits:\n  maxPods: 50\n", args: []string{"--max-pods=110"},
			check: func(o *daemonOptions) bool { return o.Limits.MaxPods == 110 }},
		{name: "a flag not given leaves the file's value", file: "cgroupDriver: systemd\n", args: []string{"--max-pods=7"},
			check: func(o *daemonOptions) bool { return o.CgroupDriver == "systemd" && o.Limits.MaxPods == 7 }},
		{name: "an empty flag wins over the file", file: "handoff:\n  kubeletHealthzURL: http://10.0.0.1:10248/healthz\n", args: []string{"--kubelet-healthz-url="},
			check: func(o *daemonOptions) bool { return o.KubeletHealthzURL == "" }},
		{name: "the file's empty value is kept", file: "containerLogDir: \"\"\nhandoff:\n  kubeletHealthzURL: \"\"\n",
			check: func(o *daemonOptions) bool { return o.ContainerLogDir == "" && o.KubeletHealthzURL == "" }},
		{name: "a list flag replaces the file's list", file: "listen:\n  adminGroups: [ops, sre]\n", args: []string{"--admin-group=root"},
			check: func(o *daemonOptions) bool { return reflect.DeepEqual(o.TCP.AdminGroups, []string{"root"}) }},
		{name: "durations both ways", file: "checkpointer:\n  activateAfter: 1m\n  withdrawAfter: 45s\n", args: []string{"--checkpointer-activate-after=5s"},
			check: func(o *daemonOptions) bool {
				return o.CheckpointerActivate == 5*time.Second && o.CheckpointerWithdraw == 45*time.Second
			}},
		{name: "false in the file, true on the command line", file: "releaseStartupPages: false\npivot:\n  tcpMigrateReq: false\n", args: []string{"--tcp-migrate-req=true"},
			check: func(o *daemonOptions) bool { return !o.ReleaseStartupPages && o.TCPMigrateReq }},
		{name: "flag-only flags are untouched", file: "rootDir: /srv/bootlet\n", args: []string{"--node-name=n1"},
			check: func(o *daemonOptions) bool { return o.NodeName == "n1" }},
		{name: "a rule spanning the file and a flag sees both", file: "pivot:\n  selfHostedAssets: /etc/kubernetes/self-hosted\n", args: []string{"--pivot-kubeconfig=/etc/kubernetes/admin.conf"},
			check: func(o *daemonOptions) bool { return o.PivotKubeconfig == "/etc/kubernetes/admin.conf" }},
		{name: "relative paths in the file are the file's directory's", file: "manifestsDir: manifests\n",
			check: func(o *daemonOptions) bool {
				return filepath.IsAbs(o.ManifestsDir) && filepath.Base(o.ManifestsDir) == "manifests"
			}},
		{name: "a bad flag is reported at its field", file: "rootDir: /srv/bootlet\n", args: []string{"--cgroup-driver=cgroupv3"},
			wantErr: `cgroupDriver: Unsupported value: "cgroupv3"`},
		{name: "every invalid field at once", file: "limits:\n  maxPods: -1\nlisten:\n  tlsCertFile: /pki/b.crt\n",
			wantErr: "[listen.tlsPrivateKeyFile: Required value: the key of tlsCertFile, limits.maxPods: Invalid value: -1: must be greater than or equal to 0]"},
		{name: "unknown field names the file", file: "rootdir: /srv\n", wantErr: `bootlet.yaml: strict decoding error: unknown field "rootdir"`},
		{name: "wrong kind names the file", file: "-", wantErr: `bootlet.yaml: apiVersion "bootlet.dev/v1alpha1", kind "Pod"`},
		{name: "write-config-to without a file validates the flags", args: []string{"--write-config-to=-", "--max-watches=-3"},
			wantErr: "invalid configuration (the flags): limits.maxWatches: Invalid value: -3"},
		{name: "without --config or --write-config-to nothing changes", args: []string{"--cgroup-driver=cgroupv3"},
			check: func(o *daemonOptions) bool { return o.CgroupDriver == "cgroupv3" }}, // node.Run refuses it, as before
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &daemonOptions{}
			fs := daemonCmd(o).Flags()
			args := tc.args
			if tc.file != "" {
				path := filepath.Join(t.TempDir(), "bootlet.yaml")
				body := header + tc.file
				if tc.file == "-" {
					body = "apiVersion: bootlet.dev/v1alpha1\nkind: Pod\n"
				}
				if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append([]string{"--config", path}, args...)
			}
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			err := resolveConfig(fs, o)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(o) {
				t.Errorf("options %+v", o)
			}
		})
	}
}

// `bootlet daemon --write-config-to -` prints a complete file of the
// defaults, which decodes back to them; flags given are in it.
func TestWriteConfigTo(t *testing.T) {
	out, err := runRoot(t, "daemon", "--write-config-to", "-")
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Decode([]byte(out), "/")
	if err != nil {
		t.Fatalf("printed file does not decode: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(c, config.Defaults()) {
		t.Errorf("printed file is not the defaults:\n%s", out)
	}
	for _, f := range configFields {
		last := f.path[strings.LastIndex(f.path, ".")+1:]
		if !strings.Contains(out, last+":") {
			t.Errorf("printed file lacks %s:\n%s", f.path, out)
		}
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "bootlet.yaml")
	t.Chdir(dir)
	if _, err := runRoot(t, "daemon", "--max-pods=20", "--manifests-dir=manifests", "--write-config-to", path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A flag's relative path was the working directory's; written
	// absolute, it stays so.
	if c, err = config.Decode(data, "/elsewhere"); err != nil || *c.Limits.MaxPods != 20 || c.ManifestsDir != filepath.Join(dir, "manifests") {
		t.Errorf("written file: %v, maxPods %v, manifestsDir %q\n%s", err, c.Limits.MaxPods, c.ManifestsDir, data)
	}
}

// docs/configuration.md documents every field with its flag.
func TestConfigurationDocumentsEveryField(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range configFields {
		if !strings.Contains(string(doc), "| `"+f.path+"` | `--"+f.flag+"` |") {
			t.Errorf("docs/configuration.md has no row | `%s` | `--%s` |", f.path, f.flag)
		}
	}
	for name := range configFlagOnly {
		if !strings.Contains(string(doc), "`--"+name+"`") {
			t.Errorf("docs/configuration.md does not mention the flag-only --%s", name)
		}
	}
}

// The config file bootlet.service ships (dist/systemd/bootlet-config.yaml)
// sets exactly the settings hack/bootlet-up.sh passes as flags, so the
// units run the daemon as make up and make reboot do; the node name stays
// a flag (the host name by default, on both). dist/systemd's TestBootOrder
// checks the unit's command line and the file's paths against the others.
func TestShippedConfigIsMakeUps(t *testing.T) {
	data, err := os.ReadFile("../../../dist/systemd/bootlet-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	flagOf := map[string]string{}
	for _, f := range configFields {
		flagOf[f.path] = f.flag
	}
	var inFile []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if prefix == "" && (k == "apiVersion" || k == "kind") {
				continue
			}
			path := prefix + k
			if sub, ok := v.(map[string]any); ok {
				walk(path+".", sub)
				continue
			}
			flag, ok := flagOf[path]
			if !ok {
				t.Errorf("bootlet-config.yaml sets %s, which no daemon flag stands for", path)
				continue
			}
			inFile = append(inFile, flag)
		}
	}
	walk("", doc)
	upFlags, err := shellcmd.ScriptFlags("../../../hack/bootlet-up.sh", `setsid "${BIN}/bootlet" daemon`)
	if err != nil {
		t.Fatal(err)
	}
	upFlags = slices.DeleteFunc(upFlags, func(f string) bool { return f == "node-name" })
	slices.Sort(inFile)
	slices.Sort(upFlags)
	if !slices.Equal(inFile, upFlags) {
		t.Errorf("bootlet-config.yaml sets the settings of %q; hack/bootlet-up.sh passes %q", inFile, upFlags)
	}
}

// runRoot runs args as bootlet would, with this package's verbs.
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return clitest.Run(t, func(*string) []*cobra.Command { return []*cobra.Command{NewCommand(nil)} }, args...)
}

// TestEffectiveConfig: what the daemon serves to the CLI is its options as
// a file that decodes, flags included, relative paths made absolute.
func TestEffectiveConfig(t *testing.T) {
	o := &daemonOptions{}
	cmd := daemonCmd(o)
	if err := cmd.ParseFlags([]string{"--root-dir", "/srv/bootlet", "--pivot-kubeconfig", "/srv/assets/admin.conf", "--self-hosted-assets", "rel/self-hosted"}); err != nil {
		t.Fatal(err)
	}
	data, err := effectiveConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Decode(data, "/")
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	wd, _ := os.Getwd()
	if c.RootDir != "/srv/bootlet" || c.Pivot.Kubeconfig != "/srv/assets/admin.conf" || c.Pivot.SelfHostedAssets != filepath.Join(wd, "rel/self-hosted") {
		t.Errorf("effective configuration:\n%s", data)
	}
}
