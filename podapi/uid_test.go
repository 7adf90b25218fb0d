package podapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/bootlet/bootlet/checkpoint"
)

// badUIDs are UIDs that each crashed the daemon or let a pod's directory
// leave ROOT/pods before the API checked the form.
var badUIDs = []string{"a_b", "a/b", ".", "..", "../../x", " ", "\t", "x\x00",
	"11111111-2222-3333-4444-55555555555", // one digit short
	"11111111-2222-3333-4444-55555555555G",
	"0B3E2F4E-1111-2222-3333-444455556666", // uppercase: not canonical
	"{0b3e2f4e-1111-2222-3333-444455556666}",
	"urn:uuid:0b3e2f4e-1111-2222-3333-444455556666",
	"0b3e2f4e111122223333444455556666", // no dashes
}

func podWithUID(uid string) string {
	b, _ := json.Marshal(uid)
	return `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","uid":` + string(b) + `},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`
}

// TestCreateRefusesBadUID: create, server-side apply (which creates) and
// update with a malformed UID get a 422 naming metadata.uid, and nothing
// is stored.
func TestCreateRefusesBadUID(t *testing.T) {
	s, rt, store := newTestServer(t)
	for _, uid := range badUIDs {
		for _, call := range []struct{ method, path, ct string }{
			{http.MethodPost, "/api/v1/namespaces/default/pods", "application/json"},
			{http.MethodPatch, "/api/v1/namespaces/default/pods/p?fieldManager=t", "application/apply-patch+yaml"},
		} {
			rec, st := do(s, call.method, call.path, call.ct, podWithUID(uid))
			if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(st.Message, "metadata.uid") {
				t.Errorf("%s UID %q: %d %q, want 422 naming metadata.uid", call.method, uid, rec.Code, st.Message)
			}
		}
	}
	if n := len(store.List(checkpoint.KindPod)); n != 0 || len(rt.synced) != 0 {
		t.Fatalf("%d pods stored, %d synced after refused creates", n, len(rt.synced))
	}
	// A stored pod: an update or patch may not put a bad UID in.
	mustCreatePod(t, s, goodPod)
	for _, uid := range badUIDs {
		rec, st := do(s, http.MethodPut, "/api/v1/namespaces/default/pods/p", "application/json", podWithUID(uid))
		if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(st.Message, "metadata.uid") {
			t.Errorf("PUT UID %q: %d %q, want 422 naming metadata.uid", uid, rec.Code, st.Message)
		}
		b, _ := json.Marshal(uid)
		rec, st = do(s, http.MethodPatch, "/api/v1/namespaces/default/pods/p", "application/merge-patch+json", `{"metadata":{"uid":`+string(b)+`}}`)
		if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(st.Message, "metadata.uid") {
			t.Errorf("merge patch UID %q: %d %q, want 422 naming metadata.uid", uid, rec.Code, st.Message)
		}
	}
	if p := getPod(t, s); p.UID != "11111111-2222-3333-4444-555555555555" {
		t.Errorf("the stored pod's UID became %q", p.UID)
	}
}

// TestLoadQuarantinesBadUID: a pod record with a UID an older version
// accepted is quarantined at load (with the reason), and the other pods
// load; before, NewRegistry loaded it and its worker crashed the daemon.
func TestLoadQuarantinesBadUID(t *testing.T) {
	dir := t.TempDir()
	s, _, old := newServerIn(t, dir)
	mustCreatePod(t, s, goodPod)
	// An older version's record, next to the good one.
	bad := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"old","namespace":"default","uid":".."},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`
	if _, err := old.Put(checkpoint.KindPod, "default", "old", []byte(bad)); err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry("node1", store)
	if err != nil {
		t.Fatal(err)
	}
	pods, _ := reg.ListPods("")
	if len(pods) != 1 || pods[0].Name != "p" {
		t.Fatalf("loaded %d pods (%v), want only the good one", len(pods), pods)
	}
	q := store.Quarantined()
	if len(q) != 1 || !strings.Contains(q[0].Reason, "metadata.uid") {
		t.Fatalf("quarantined %+v, want the bad record with a reason naming metadata.uid", q)
	}
}
