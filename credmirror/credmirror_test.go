package credmirror

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	btypes "github.com/bootlet/bootlet/types"
)

// secretFor is a credential Secret named name mirrored to dir.
func secretFor(t *testing.T, name, dir string, data map[string]string) *v1.Secret {
	t.Helper()
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem}, Data: map[string][]byte{}}
	var items []v1.KeyToPath
	for k, v := range data {
		s.Data[k] = []byte(v)
		items = append(items, v1.KeyToPath{Key: k, Path: strings.ReplaceAll(k, "-", "/")})
	}
	if err := Annotate(s, Target{Dir: dir, Items: items}); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTargetOf(t *testing.T) {
	good := secretFor(t, "kube-apiserver", "/etc/kubernetes/credentials/kube-apiserver", map[string]string{"pki-ca.crt": "x"})
	with := func(f func(s *v1.Secret)) *v1.Secret { s := good.DeepCopy(); f(s); return s }
	tests := []struct {
		name    string
		secret  *v1.Secret
		ok      bool
		wantErr string
	}{
		{"a credential Secret", good, true, ""},
		{"not one", &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "kube-system"}}, false, ""},
		{"another namespace", with(func(s *v1.Secret) { s.Namespace = "default" }), true, "metadata.namespace"},
		{"relative dir", with(func(s *v1.Secret) { s.Annotations[btypes.AnnotationCredentialDir] = "credentials/kube-apiserver" }), true, "absolute"},
		{"unclean dir", with(func(s *v1.Secret) { s.Annotations[btypes.AnnotationCredentialDir] = "/etc/../etc/kube-apiserver" }), true, "absolute"},
		{"another Secret's dir", with(func(s *v1.Secret) {
			s.Annotations[btypes.AnnotationCredentialDir] = "/etc/kubernetes/credentials/kube-scheduler"
		}), true, "must end in the Secret's name"},
		{"a system dir", with(func(s *v1.Secret) { s.Name = "etc"; s.Annotations[btypes.AnnotationCredentialDir] = "/etc" }), true, ""},
		{"the root", with(func(s *v1.Secret) { s.Annotations[btypes.AnnotationCredentialDir] = "/" }), true, "must end in the Secret's name"},
		{"bad items", with(func(s *v1.Secret) { s.Annotations[btypes.AnnotationCredentialItems] = "{" }), true, "JSON list"},
		{"no items", with(func(s *v1.Secret) { s.Annotations[btypes.AnnotationCredentialItems] = "[]" }), true, "at least one file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ok, err := TargetOf(tc.secret)
			if ok != tc.ok {
				t.Errorf("ok = %v, want %v", ok, tc.ok)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestPayloadRefusesMissingKeyAndEscapes(t *testing.T) {
	s := secretFor(t, "kube-scheduler", "/x/kube-scheduler", map[string]string{"scheduler.conf": "c"})
	tgt, _, _ := TargetOf(s)
	if _, err := Payload(s, Target{Dir: tgt.Dir, Items: append(tgt.Items, v1.KeyToPath{Key: "absent", Path: "absent"})}); err == nil {
		t.Error("a key the Secret lacks made a payload")
	}
	if _, err := Mirror(s, Target{Dir: t.TempDir() + "/kube-scheduler", Items: []v1.KeyToPath{{Key: "scheduler.conf", Path: "../escape"}}}); err == nil {
		t.Error("a path leaving the directory was written")
	}
}

func TestMirrorCreatesUpdatesAndKeeps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "credentials", "kube-apiserver")
	s := secretFor(t, "kube-apiserver", dir, map[string]string{"pki-ca.crt": "ca-1", "admission.yaml": "adm"})
	tgt, _, err := TargetOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if Complete(dir) {
		t.Fatal("complete before the first write")
	}
	if changed, err := Mirror(s, tgt); err != nil || !changed {
		t.Fatalf("first mirror: changed %v, %v", changed, err)
	}
	assertFile(t, filepath.Join(dir, "pki/ca.crt"), "ca-1")
	assertFile(t, filepath.Join(dir, "admission.yaml"), "adm")
	if fi, err := os.Stat(filepath.Join(dir, "pki/ca.crt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(filepath.Dir(dir)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("parent mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	if changed, err := Mirror(s, tgt); err != nil || changed {
		t.Errorf("unchanged Secret: changed %v, %v", changed, err)
	}
	s.Data["pki-ca.crt"] = []byte("ca-2")
	if changed, err := Mirror(s, tgt); err != nil || !changed {
		t.Errorf("changed Secret: changed %v, %v", changed, err)
	}
	assertFile(t, filepath.Join(dir, "pki/ca.crt"), "ca-2")
	got, err := Read(tgt)
	if err != nil || string(got["pki-ca.crt"]) != "ca-2" || string(got["admission.yaml"]) != "adm" {
		t.Errorf("Read = %q, %v", got, err)
	}
	// No temporary directory is left beside it.
	if es, _ := os.ReadDir(filepath.Dir(dir)); len(es) != 1 {
		t.Errorf("%d entries beside the mirror, want none", len(es)-1)
	}
}

func TestMirrorReplacesOnlyAnEmptyDirectory(t *testing.T) {
	parent := t.TempDir()
	empty := filepath.Join(parent, "kube-scheduler")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	s := secretFor(t, "kube-scheduler", empty, map[string]string{"scheduler.conf": "c"})
	tgt, _, _ := TargetOf(s)
	if _, err := Mirror(s, tgt); err != nil || !Complete(empty) {
		t.Fatalf("an empty directory was not replaced: %v", err)
	}
	busy := filepath.Join(parent, "kube-controller-manager")
	if err := os.MkdirAll(filepath.Join(busy, "someone's"), 0o755); err != nil {
		t.Fatal(err)
	}
	s = secretFor(t, "kube-controller-manager", busy, map[string]string{"controller-manager.conf": "c"})
	tgt, _, _ = TargetOf(s)
	if _, err := Mirror(s, tgt); err == nil || !strings.Contains(err.Error(), "not a mirror") {
		t.Errorf("a directory holding other files was replaced: %v", err)
	}
	if _, err := os.Stat(filepath.Join(busy, "someone's")); err != nil {
		t.Errorf("another's file is gone: %v", err)
	}
}

func TestSeedWritesOnlyAbsentMirrors(t *testing.T) {
	parent := t.TempDir()
	fresh := secretFor(t, "kube-apiserver", filepath.Join(parent, "kube-apiserver"), map[string]string{"pki-ca.crt": "rendered"})
	kept := secretFor(t, "kube-scheduler", filepath.Join(parent, "kube-scheduler"), map[string]string{"scheduler.conf": "rendered"})
	tgt, _, _ := TargetOf(kept)
	newer := kept.DeepCopy()
	newer.Data["scheduler.conf"] = []byte("from the apiserver")
	if _, err := Mirror(newer, tgt); err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, s := range []*v1.Secret{fresh, kept, {ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "kube-system"}}} {
		s.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: u})
	}
	if err := Seed(objs); err != nil {
		t.Fatal(err)
	}
	assertFile(t, filepath.Join(parent, "kube-apiserver/pki/ca.crt"), "rendered")
	assertFile(t, filepath.Join(parent, "kube-scheduler/scheduler.conf"), "from the apiserver")
}

func TestControllerFollowsTheSecrets(t *testing.T) {
	parent := t.TempDir()
	s := secretFor(t, "kube-controller-manager", filepath.Join(parent, "kube-controller-manager"), map[string]string{"pki-ca.key": "key-1"})
	plain := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "kube-system", Labels: map[string]string{btypes.LabelCredentials: ""}}}
	cs := fake.NewSimpleClientset(s, plain)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { New(Config{Client: cs, Resync: 50 * time.Millisecond}).Run(ctx); close(done) }()
	path := filepath.Join(parent, "kube-controller-manager/pki/ca.key")
	waitFile(t, path, "key-1")
	s.Data["pki-ca.key"] = []byte("key-2")
	if _, err := cs.CoreV1().Secrets("kube-system").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFile(t, path, "key-2")
	// A directory removed by hand comes back at the next resync.
	if err := os.RemoveAll(filepath.Dir(filepath.Dir(path))); err != nil {
		t.Fatal(err)
	}
	waitFile(t, path, "key-2")
	cancel()
	<-done
}

func assertFile(t *testing.T, path, want string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != want {
		t.Errorf("%s = %q (%v), want %q", path, b, err, want)
	}
}

func waitFile(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && string(b) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %q (%v), want %q", path, b, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
