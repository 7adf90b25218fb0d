package checkpoint

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// inspectRoot is a store with one record of each kind and a damaged pod.
func inspectRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Record{
		{Kind: KindPod, Namespace: "kube-system", Name: "etcd", Data: []byte(`{"kind":"Pod"}`)},
		{Kind: KindSecret, Namespace: "default", Name: "s", Data: []byte(`{"kind":"Secret"}`)},
		{Kind: KindConfigMap, Namespace: "default", Name: "cm", Data: []byte(`{"kind":"ConfigMap"}`)},
		{Kind: KindPodCheckpoint, Namespace: "kube-system", Name: "kube-apiserver", Data: []byte(`{"kind":"Checkpoint"}`)},
	} {
		if _, err := s.Put(r.Kind, r.Namespace, r.Name, r.Data); err != nil {
			t.Fatal(err)
		}
	}
	bad := filepath.Join(root, "checkpoint", "pods", "default", "bad.json")
	if err := os.MkdirAll(filepath.Dir(bad), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"formatVersion":1`), 0o600); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestInspectOne(t *testing.T) {
	root := inspectRoot(t)
	for _, tc := range []struct {
		name              string
		kind              Kind
		namespace, object string
		data, err         string
	}{
		{"a pod", KindPod, "kube-system", "etcd", `{"kind":"Pod"}`, ""},
		{"a checkpointer's record", KindPodCheckpoint, "kube-system", "kube-apiserver", `{"kind":"Checkpoint"}`, ""},
		{"another namespace's", KindPod, "default", "etcd", "", "no checkpointed pod default/etcd under " + root},
		{"another kind's", KindSecret, "default", "cm", "", "no checkpointed secret default/cm under " + root},
		{"a damaged one", KindPod, "default", "bad", "", "no checkpointed pod default/bad under " + root},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := InspectOne(root, tc.kind, tc.namespace, tc.object)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || string(r.Data) != tc.data {
				t.Fatalf("%+v, %v", r, err)
			}
		})
	}
	if _, err := InspectOne(filepath.Join(root, "none"), KindPod, "default", "x"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("no store: %v", err)
	}
}

func TestInspectObjectsLeavesOutTheCheckpointersRecords(t *testing.T) {
	recs, err := InspectObjects(inspectRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Kind)+"/"+r.Namespace+"/"+r.Name)
	}
	if want := []string{"configmaps/default/cm", "pods/kube-system/etcd", "secrets/default/s"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
