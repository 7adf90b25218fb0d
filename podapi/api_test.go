package podapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bootlet/bootlet/checkpoint"
	btypes "github.com/bootlet/bootlet/types"
)

func mustCreatePod(t testing.TB, s *Server, body string) v1.Pod {
	t.Helper()
	rec, _ := do(s, http.MethodPost, "/api/v1/namespaces/default/pods", "application/json", body)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	var p v1.Pod
	_ = json.Unmarshal(rec.Body.Bytes(), &p)
	return p
}

type streamedEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// openWatch starts a watch against a real HTTP server (streaming) and
// returns a channel of decoded frames.
func openWatch(t *testing.T, s *Server, query string) (<-chan streamedEvent, *http.Response) {
	t.Helper()
	hs := httptest.NewServer(asAdmin(s))
	t.Cleanup(hs.Close)
	resp, err := http.Get(hs.URL + "/api/v1/namespaces/default/pods?watch=true&" + query)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan streamedEvent, 100)
	if resp.StatusCode != http.StatusOK {
		close(ch)
		return ch, resp
	}
	t.Cleanup(func() { resp.Body.Close() })
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			var ev streamedEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("bad frame %q: %v", sc.Text(), err)
				return
			}
			ch <- ev
		}
	}()
	return ch, resp
}

func next(t *testing.T, ch <-chan streamedEvent) (string, v1.Pod) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch ended")
		}
		var p v1.Pod
		if err := json.Unmarshal(ev.Object, &p); err != nil {
			t.Fatal(err)
		}
		if p.Kind != "Pod" || p.APIVersion != "v1" {
			t.Errorf("watch object without apiVersion/kind: %s", ev.Object)
		}
		return ev.Type, p
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event within 5s")
	}
	return "", v1.Pod{}
}

func TestWatchStreamsChanges(t *testing.T) {
	s, _, _ := newTestServer(t)
	p := mustCreatePod(t, s, goodPod)
	ch, resp := openWatch(t, s, "resourceVersion=0&allowWatchBookmarks=true")
	if resp.StatusCode != 200 {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	if typ, got := next(t, ch); typ != "ADDED" || got.Name != "p" {
		t.Fatalf("want synthetic ADDED p, got %s %s", typ, got.Name)
	}
	if typ, _ := next(t, ch); typ != "BOOKMARK" {
		t.Fatalf("want a BOOKMARK after the initial state, got %s", typ)
	}
	// A status-only update bumps resourceVersion and is MODIFIED.
	s.Registry.PodStatus(btypes.PodKey{Namespace: "default", Name: "p"}, p.UID, v1.PodStatus{Phase: v1.PodRunning})
	typ, got := next(t, ch)
	if typ != "MODIFIED" || got.Status.Phase != v1.PodRunning || got.ResourceVersion == p.ResourceVersion {
		t.Fatalf("status update: %s phase=%s rv=%s (was %s)", typ, got.Status.Phase, got.ResourceVersion, p.ResourceVersion)
	}
	do(s, http.MethodDelete, "/api/v1/namespaces/default/pods/p", "", "")
	if typ, got := next(t, ch); typ != "MODIFIED" || got.DeletionTimestamp == nil {
		t.Fatalf("delete marks Terminating: %s", typ)
	}
	s.Registry.PodTerminated(btypes.PodKey{Namespace: "default", Name: "p"}, p.UID)
	if typ, _ := next(t, ch); typ != "DELETED" {
		t.Fatalf("want DELETED, got %s", typ)
	}
}

func TestWatchResumesAndExpires(t *testing.T) {
	s, _, _ := newTestServer(t)
	p := mustCreatePod(t, s, goodPod)
	s.Registry.PodStatus(btypes.PodKey{Namespace: "default", Name: "p"}, p.UID, v1.PodStatus{Phase: v1.PodRunning})
	// Resuming from the create's RV replays only the later change.
	ch, _ := openWatch(t, s, "resourceVersion="+p.ResourceVersion)
	if typ, got := next(t, ch); typ != "MODIFIED" || got.Status.Phase != v1.PodRunning {
		t.Fatalf("resume: %s %s", typ, got.Status.Phase)
	}
	// Push the create out of the bounded history: its RV is now too old.
	old := WatchHistory
	WatchHistory = 3
	defer func() { WatchHistory = old }()
	for i := 0; i < 5; i++ {
		s.Registry.PodStatus(btypes.PodKey{Namespace: "default", Name: "p"}, p.UID, v1.PodStatus{Phase: v1.PodRunning, Message: strings.Repeat("x", i+1)})
	}
	hs := httptest.NewServer(asAdmin(s))
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/api/v1/namespaces/default/pods?watch=true&resourceVersion=" + p.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st metav1.Status
	_ = json.NewDecoder(resp.Body).Decode(&st)
	if resp.StatusCode != http.StatusGone || st.Reason != metav1.StatusReasonExpired || !strings.Contains(st.Message, "too old resource version") {
		t.Fatalf("want 410 Expired too old resource version, got %d %+v", resp.StatusCode, st)
	}
	// Selectors: a watch for another name sees nothing of p, a label
	// selector sees p leave when its labels change.
	ch2, _ := openWatch(t, s, "resourceVersion=0&labelSelector=app%3Dweb")
	patch := `{"metadata":{"labels":{"app":"web"}}}`
	if rec, _ := do(s, http.MethodPatch, "/api/v1/namespaces/default/pods/p", "application/merge-patch+json", patch); rec.Code != 200 {
		t.Fatalf("patch: %d %s", rec.Code, rec.Body)
	}
	if typ, _ := next(t, ch2); typ != "ADDED" {
		t.Fatalf("start matching the selector: want ADDED, got %s", typ)
	}
	do(s, http.MethodPatch, "/api/v1/namespaces/default/pods/p", "application/merge-patch+json", `{"metadata":{"labels":{"app":"db"}}}`)
	if typ, _ := next(t, ch2); typ != "DELETED" {
		t.Fatalf("stop matching the selector: want DELETED, got %s", typ)
	}
}

func TestWatchInitialEventsEndBookmark(t *testing.T) {
	s, _, _ := newTestServer(t)
	mustCreatePod(t, s, goodPod)
	ch, resp := openWatch(t, s, "sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1")
	if resp.StatusCode != 200 {
		t.Fatalf("%d", resp.StatusCode)
	}
	next(t, ch)
	typ, p := next(t, ch)
	if typ != string(watch.Bookmark) || p.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("want the initial-events-end bookmark, got %s %v", typ, p.Annotations)
	}
	select { // timeoutSeconds ends the stream
	case _, ok := <-ch:
		for ok {
			_, ok = <-ch
		}
	case <-time.After(5 * time.Second):
		t.Fatal("timeoutSeconds=1 did not end the watch")
	}
}

func getPod(t testing.TB, s *Server) v1.Pod {
	rec, _ := do(s, http.MethodGet, "/api/v1/namespaces/default/pods/p", "", "")
	var p v1.Pod
	_ = json.Unmarshal(rec.Body.Bytes(), &p)
	return p
}

func TestPatchTypes(t *testing.T) {
	s, _, _ := newTestServer(t)
	mustCreatePod(t, s, goodPod)
	cases := []struct{ ct, body, label string }{
		{"application/strategic-merge-patch+json", `{"metadata":{"labels":{"a":"1"}},"spec":{"containers":[{"name":"c","image":"busybox:2"}]}}`, "1"},
		{"application/merge-patch+json", `{"metadata":{"labels":{"a":"2"}}}`, "2"},
		{"application/json-patch+json", `[{"op":"replace","path":"/metadata/labels/a","value":"3"}]`, "3"},
	}
	for _, c := range cases {
		rec, st := do(s, http.MethodPatch, "/api/v1/namespaces/default/pods/p", c.ct, c.body)
		if rec.Code != 200 {
			t.Fatalf("%s: %d %+v", c.ct, rec.Code, st)
		}
		if p := getPod(t, s); p.Labels["a"] != c.label || p.Spec.Containers[0].Image != "busybox:2" || len(p.Spec.Containers) != 1 {
			t.Fatalf("%s: labels %v image %s", c.ct, p.Labels, p.Spec.Containers[0].Image)
		}
	}
	before := getPod(t, s)
	// Invalid patches change nothing: immutable field (422), bad JSON patch
	// op (422), stale resourceVersion (409), unknown type (415).
	bad := []struct {
		ct, body string
		code     int
	}{
		{"application/merge-patch+json", `{"spec":{"containers":[{"name":"c","image":"x","command":["sh"]}]}}`, 422},
		{"application/json-patch+json", `[{"op":"remove","path":"/metadata/nope"}]`, 422},
		{"application/merge-patch+json", `{"metadata":{"resourceVersion":"1","labels":{"a":"9"}}}`, 409},
		{"application/json-patch+json", `not json`, 400},
		{"text/plain", `{}`, 415},
		{"application/merge-patch+json", `{"metadata":{"name":"other"}}`, 400},
	}
	for _, c := range bad {
		if rec, st := do(s, http.MethodPatch, "/api/v1/namespaces/default/pods/p", c.ct, c.body); rec.Code != c.code || st.Kind != "Status" {
			t.Errorf("%s %s: want %d Status, got %d %s", c.ct, c.body, c.code, rec.Code, rec.Body)
		}
	}
	if after := getPod(t, s); after.ResourceVersion != before.ResourceVersion {
		t.Fatalf("a rejected patch changed the pod")
	}
	// Secrets and configmaps patch too.
	do(s, http.MethodPost, "/api/v1/namespaces/default/configmaps", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"a":"1"}}`)
	if rec, _ := do(s, http.MethodPatch, "/api/v1/namespaces/default/configmaps/cm", "application/strategic-merge-patch+json", `{"data":{"b":"2"}}`); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"b":"2"`) || !strings.Contains(rec.Body.String(), `"a":"1"`) {
		t.Fatalf("configmap patch: %d %s", rec.Code, rec.Body)
	}
}

func TestServerSideApply(t *testing.T) {
	s, _, store := newTestServer(t)
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: \"1\"\n"
	rec, st := do(s, http.MethodPatch, "/api/v1/namespaces/default/configmaps/cm?fieldManager=alice", "application/apply-patch+yaml", cm)
	if rec.Code != http.StatusCreated {
		t.Fatalf("apply create: %d %+v", rec.Code, st)
	}
	var c v1.ConfigMap
	_ = json.Unmarshal(rec.Body.Bytes(), &c)
	if len(c.ManagedFields) != 1 || c.ManagedFields[0].Manager != "alice" || c.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("managedFields after apply: %+v", c.ManagedFields)
	}
	// bob changing a field alice owns conflicts (409 with causes) and changes nothing.
	rec, st = do(s, http.MethodPatch, "/api/v1/namespaces/default/configmaps/cm?fieldManager=bob", "application/apply-patch+yaml", strings.Replace(cm, `"1"`, `"2"`, 1))
	if rec.Code != http.StatusConflict || st.Details == nil || len(st.Details.Causes) == 0 || !strings.Contains(st.Message, "alice") {
		t.Fatalf("want 409 conflict naming alice, got %d %s", rec.Code, rec.Body)
	}
	got, _ := s.Registry.GetConfigMap("default", "cm")
	if got.Data["a"] != "1" || got.ResourceVersion != c.ResourceVersion {
		t.Fatalf("conflicting apply changed the object: %v", got.Data)
	}
	// force takes ownership.
	rec, _ = do(s, http.MethodPatch, "/api/v1/namespaces/default/configmaps/cm?fieldManager=bob&force=true", "application/apply-patch+yaml", strings.Replace(cm, `"1"`, `"2"`, 1))
	if rec.Code != 200 {
		t.Fatalf("forced apply: %d %s", rec.Code, rec.Body)
	}
	got, _ = s.Registry.GetConfigMap("default", "cm")
	if got.Data["a"] != "2" {
		t.Fatalf("forced apply did not apply")
	}
	rec2, _ := store.Get(checkpoint.KindConfigMap, "default", "cm")
	if !strings.Contains(string(rec2.Data), `"manager":"bob"`) {
		t.Errorf("managedFields not checkpointed: %s", rec2.Data)
	}
	// apply without fieldManager is a 400.
	if rec, _ := do(s, http.MethodPatch, "/api/v1/namespaces/default/configmaps/cm", "application/apply-patch+yaml", cm); rec.Code != 400 {
		t.Fatalf("apply without fieldManager: %d", rec.Code)
	}
	// A plain create records an Update entry for its manager.
	req := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/pods", strings.NewReader(goodPod))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "kubectl/v1.36.3 (linux/amd64)")
	w := httptest.NewRecorder()
	asAdmin(s).ServeHTTP(w, req)
	var p v1.Pod
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	if len(p.ManagedFields) != 1 || p.ManagedFields[0].Manager != "kubectl" || p.ManagedFields[0].Operation != metav1.ManagedFieldsOperationUpdate {
		t.Fatalf("create managedFields: %+v", p.ManagedFields)
	}
}

func TestFieldValidation(t *testing.T) {
	s, _, store := newTestServer(t)
	unknown := strings.Replace(goodPod, `"spec":{`, `"spec":{"foo":1,`, 1)
	rec, st := do(s, http.MethodPost, "/api/v1/namespaces/default/pods?fieldValidation=Strict", "application/json", unknown)
	if rec.Code != 400 || st.Reason != metav1.StatusReasonBadRequest || !strings.Contains(st.Message, `unknown field "spec.foo"`) {
		t.Fatalf("Strict: %d %+v", rec.Code, st)
	}
	if len(store.List(checkpoint.KindPod)) != 0 {
		t.Fatal("Strict rejection stored the pod")
	}
	if rec, _ := do(s, http.MethodPost, "/api/v1/namespaces/default/pods?fieldValidation=Bogus", "application/json", goodPod); rec.Code != 400 {
		t.Fatalf("bad directive: %d", rec.Code)
	}
	rec, _ = do(s, http.MethodPost, "/api/v1/namespaces/default/pods?fieldValidation=Warn", "application/json", unknown)
	if rec.Code != 201 || !strings.Contains(rec.Header().Get("Warning"), `unknown field \"spec.foo\"`) {
		t.Fatalf("Warn: %d warning=%q", rec.Code, rec.Header().Get("Warning"))
	}
	rec, _ = do(s, http.MethodPatch, "/api/v1/namespaces/default/pods/p?fieldValidation=Strict", "application/merge-patch+json", `{"metadata":{"bogus":1}}`)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), `unknown field \"metadata.bogus\"`) {
		t.Fatalf("Strict patch: %d %s", rec.Code, rec.Body)
	}
	rec, _ = do(s, http.MethodPost, "/api/v1/namespaces/default/pods?fieldValidation=Ignore", "application/json", strings.Replace(strings.Replace(unknown, `"name":"p"`, `"name":"q"`, 1), "5555555555", "6666666666", 1))
	if rec.Code != 201 || rec.Header().Get("Warning") != "" {
		t.Fatalf("Ignore: %d %q", rec.Code, rec.Header().Get("Warning"))
	}
}

func TestDiscoveryOpenAPIAndTable(t *testing.T) {
	s, _, _ := newTestServer(t)
	mustCreatePod(t, s, goodPod)
	rec, _ := do(s, http.MethodGet, "/openapi/v3/api/v1", "", "")
	if rec.Code != 200 {
		t.Fatalf("openapi v3: %d %s", rec.Code, rec.Body)
	}
	var doc struct {
		Paths      map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Components.Schemas["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"] == nil || doc.Components.Schemas["io.k8s.api.core.v1.PodSpec"] == nil {
		t.Fatalf("v3 schemas lack Pod with its GVK")
	}
	if _, ok := doc.Components.Schemas["io.k8s.api.apps.v1.Deployment"]; ok {
		t.Fatal("v3 document carries types bootlet does not serve")
	}
	if !strings.Contains(rec.Body.String(), `"fieldValidation"`) || doc.Paths["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"] == nil {
		t.Fatal("pod PATCH with fieldValidation missing")
	}
	if rec, _ := do(s, http.MethodGet, "/openapi/v2", "", ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"io.k8s.api.core.v1.Pod"`) {
		t.Fatalf("openapi v2: %d", rec.Code)
	}
	req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/pods", nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	w := httptest.NewRecorder()
	asAdmin(s).ServeHTTP(w, req)
	var table metav1.Table
	if err := json.Unmarshal(w.Body.Bytes(), &table); err != nil || table.Kind != "Table" || len(table.Rows) != 1 || len(table.ColumnDefinitions) < 5 || table.ColumnDefinitions[1].Name != "Ready" {
		t.Fatalf("table: %v %s", err, w.Body)
	}
	var partial metav1.PartialObjectMetadata
	if err := json.Unmarshal(table.Rows[0].Object.Raw, &partial); err != nil || partial.Name != "p" || partial.Kind != "PartialObjectMetadata" {
		t.Fatalf("row object: %s", table.Rows[0].Object.Raw)
	}
	var rl metav1.APIResourceList
	rec, _ = do(s, http.MethodGet, "/api/v1", "", "")
	_ = json.Unmarshal(rec.Body.Bytes(), &rl)
	for _, r := range rl.APIResources {
		if r.Name == "pods" && (!contains(r.Verbs, "patch") || !contains(r.Verbs, "watch")) {
			t.Fatalf("pods verbs: %v", r.Verbs)
		}
	}
	rec, _ = do(s, http.MethodGet, "/metrics", "", "")
	if !strings.Contains(rec.Body.String(), `bootlet_pods{phase="Pending"} 1`) || !strings.Contains(rec.Body.String(), `bootlet_api_request_duration_seconds_count{code="201",resource="pods",subresource="",verb="CREATE"} 1`) {
		t.Fatalf("metrics: %s", rec.Body)
	}
}

func contains(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

var _ runtime.Object = &v1.Pod{}

// FuzzPatch feeds arbitrary patches of every type: the server answers
// without a 5xx, a rejected patch changes nothing (served, stored or
// started), and an accepted one is in the checkpoint before it is visible.
// Every input starts from the same state — a server holding just goodPod —
// but the server is only rebuilt after a patch actually changed the pod, so
// most iterations cost one request rather than a checkpoint directory and
// its fsyncs. That matters: the fuzzer re-runs every input that finds new
// coverage hundreds of times to minimize it (for up to -fuzzminimizetime,
// 60s), so at ~10ms an input minimization stalled fuzzing for most of a run.
func FuzzPatch(f *testing.F) {
	f.Add(0, []byte(`{"metadata":{"labels":{"a":"b"}}}`))
	f.Add(1, []byte(`{"spec":{"containers":[{"name":"c","image":"x"}]}}`))
	f.Add(2, []byte(`[{"op":"add","path":"/metadata/labels","value":{"x":"y"}}]`))
	f.Add(3, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"))
	types := []string{"application/merge-patch+json", "application/strategic-merge-patch+json", "application/json-patch+json", "application/apply-patch+yaml"}
	base := f.TempDir()
	var (
		s      *Server
		rt     *fakeRuntime
		store  *checkpoint.Store
		dir    string
		before v1.Pod
		stored checkpoint.Record
	)
	fresh := func(t testing.TB) {
		t.Helper()
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
		var err error
		if dir, err = os.MkdirTemp(base, "server"); err != nil {
			t.Fatal(err)
		}
		s, rt, store = newServerIn(t, dir)
		before = mustCreatePod(t, s, goodPod)
		stored, _ = store.Get(checkpoint.KindPod, "default", "p")
	}
	fresh(f)
	f.Fuzz(func(t *testing.T, kind int, body []byte) {
		ct := types[(kind%len(types)+len(types))%len(types)]
		rt.synced = rt.synced[:0]
		req := httptest.NewRequest(http.MethodPatch, "/api/v1/namespaces/default/pods/p?fieldManager=fuzz", bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		rec := httptest.NewRecorder()
		asAdmin(s).ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("server error %d for %s %q: %s", rec.Code, ct, body, rec.Body)
		}
		after, err := s.Registry.GetPod("default", "p")
		if err != nil {
			t.Fatalf("patch (%d) removed the pod: %v", rec.Code, err)
		}
		now, ok := store.Get(checkpoint.KindPod, "default", "p")
		if !ok {
			t.Fatalf("patch (%d) removed the pod from the checkpoint", rec.Code)
		}
		if after.ResourceVersion == before.ResourceVersion {
			// Rejected, or accepted as a no-op: nothing may have changed.
			if now.Revision != stored.Revision || !bytes.Equal(now.Data, stored.Data) {
				t.Fatalf("patch (%d) changed the checkpoint but not the resourceVersion", rec.Code)
			}
			if rec.Code >= 300 && len(rt.synced) != 0 {
				t.Fatalf("rejected patch (%d) was handed to the runtime", rec.Code)
			}
			return
		}
		if rec.Code >= 300 {
			t.Fatalf("rejected patch (%d) changed the pod", rec.Code)
		}
		var cp v1.Pod
		if err := json.Unmarshal(now.Data, &cp); err != nil || cp.ResourceVersion != after.ResourceVersion {
			t.Fatalf("accepted patch (%d) serves resourceVersion %s but the checkpoint holds %s (%v)", rec.Code, after.ResourceVersion, cp.ResourceVersion, err)
		}
		fresh(t) // the next input starts from goodPod again
	})
}
