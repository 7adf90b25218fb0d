package podapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/podapi/authn"
)

type fakeRuntime struct{ synced, terminated []types.UID }

func (f *fakeRuntime) Sync(p *v1.Pod) { f.synced = append(f.synced, p.UID) }
func (f *fakeRuntime) Terminate(uid types.UID, _ time.Duration) bool {
	f.terminated = append(f.terminated, uid)
	return true
}
func (f *fakeRuntime) Refresh() {}
func (f *fakeRuntime) Logs(context.Context, *v1.Pod, *v1.PodLogOptions, io.Writer) error {
	return nil
}

func newTestServer(t testing.TB) (*Server, *fakeRuntime, *checkpoint.Store) {
	t.Helper()
	return newServerIn(t, t.TempDir())
}

// newServerIn is newTestServer with the checkpoint under dir, for fuzz
// targets that reuse one server across inputs and manage the directory.
func newServerIn(t testing.TB, dir string) (*Server, *fakeRuntime, *checkpoint.Store) {
	t.Helper()
	store, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry("node1", store)
	if err != nil {
		t.Fatal(err)
	}
	rt := &fakeRuntime{}
	reg.SetRuntime(rt)
	return NewServer(reg), rt, store
}

const goodPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","uid":"11111111-2222-3333-4444-555555555555"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`

func do(s *Server, method, path, ct, body string) (*httptest.ResponseRecorder, metav1.Status) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	rec := httptest.NewRecorder()
	asAdmin(s).ServeHTTP(rec, req)
	var st metav1.Status
	_ = json.Unmarshal(rec.Body.Bytes(), &st)
	return rec, st
}

func TestCreateGetDelete(t *testing.T) {
	s, rt, store := newTestServer(t)
	rec, _ := do(s, http.MethodPost, "/api/v1/namespaces/default/pods", "application/json", goodPod)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	var p v1.Pod
	_ = json.Unmarshal(rec.Body.Bytes(), &p)
	if p.UID != "11111111-2222-3333-4444-555555555555" || p.Spec.NodeName != "node1" || p.ResourceVersion == "" ||
		p.Annotations["kubernetes.io/config.hash"] != string(p.UID) || p.Spec.RestartPolicy != v1.RestartPolicyAlways {
		t.Errorf("created pod not defaulted like a static pod: %+v", p.ObjectMeta)
	}
	if len(rt.synced) != 1 {
		t.Errorf("runtime not told about the pod")
	}
	if _, ok := store.Get(checkpoint.KindPod, "default", "p"); !ok {
		t.Error("pod acknowledged but not in the checkpoint")
	}
	if rec, st := do(s, http.MethodPost, "/api/v1/namespaces/default/pods", "application/json", goodPod); rec.Code != http.StatusConflict || st.Reason != metav1.StatusReasonAlreadyExists {
		t.Errorf("duplicate create: %d %+v", rec.Code, st)
	}
	if rec, _ := do(s, http.MethodDelete, "/api/v1/namespaces/default/pods/p", "", ""); rec.Code != http.StatusOK || len(rt.terminated) != 1 {
		t.Errorf("delete: %d %s", rec.Code, rec.Body)
	}
	rec, _ = do(s, http.MethodGet, "/api/v1/namespaces/default/pods/p", "", "")
	_ = json.Unmarshal(rec.Body.Bytes(), &p)
	if p.DeletionTimestamp == nil {
		t.Error("a deleted pod is Terminating until the runtime reports it gone")
	}
}

// TestErrorShapes: every failure is a metav1.Status with the apiserver's
// code and reason, and stores nothing.
func TestErrorShapes(t *testing.T) {
	big := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"x":"` + strings.Repeat("a", MaxBodyBytes) + `"}}}`
	tests := []struct {
		name, method, path, ct, body string
		code                         int
		reason                       metav1.StatusReason
		causeField                   string
	}{
		{"undecodable", "POST", "/api/v1/namespaces/default/pods", "application/json", `{"apiVersion":`, 400, metav1.StatusReasonBadRequest, ""},
		{"wrong kind", "POST", "/api/v1/namespaces/default/pods", "application/json", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"p"}}`, 400, metav1.StatusReasonBadRequest, ""},
		{"wrong version", "POST", "/api/v1/namespaces/default/pods", "application/json", `{"apiVersion":"v2","kind":"Pod","metadata":{"name":"p"}}`, 400, metav1.StatusReasonBadRequest, ""},
		{"namespace mismatch", "POST", "/api/v1/namespaces/default/pods", "application/json", strings.Replace(goodPod, `"name":"p"`, `"name":"p","namespace":"other"`, 1), 400, metav1.StatusReasonBadRequest, ""},
		{"too large", "POST", "/api/v1/namespaces/default/pods", "application/json", big, 413, metav1.StatusReasonRequestEntityTooLarge, ""},
		{"unsupported media type", "POST", "/api/v1/namespaces/default/pods", "text/plain", goodPod, 415, metav1.StatusReasonUnsupportedMediaType, ""},
		{"invalid pod names every field", "POST", "/api/v1/namespaces/default/pods", "application/json",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"Bad_Name"},"spec":{"containers":[{"name":"c"}]}}`, 422, metav1.StatusReasonInvalid, "spec.containers[0].image"},
		{"not found", "GET", "/api/v1/namespaces/default/pods/nope", "", "", 404, metav1.StatusReasonNotFound, ""},
		{"unknown resource", "GET", "/api/v1/namespaces/default/widgets", "", "", 404, metav1.StatusReasonNotFound, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, rt, store := newTestServer(t)
			rec, st := do(s, tc.method, tc.path, tc.ct, tc.body)
			if rec.Code != tc.code || st.Kind != "Status" || st.Status != metav1.StatusFailure || st.Reason != tc.reason || int(st.Code) != tc.code {
				t.Fatalf("got %d %+v", rec.Code, st)
			}
			if tc.causeField != "" {
				found := false
				for _, c := range st.Details.Causes {
					found = found || c.Field == tc.causeField
				}
				if !found || !strings.Contains(st.Message, "metadata.name") {
					t.Errorf("causes %+v / message %q must name every invalid field", st.Details.Causes, st.Message)
				}
			}
			if len(store.List(checkpoint.KindPod)) != 0 || len(rt.synced) != 0 {
				t.Error("a failed request stored or started something")
			}
		})
	}
}

func TestStaleUpdateConflicts(t *testing.T) {
	s, _, _ := newTestServer(t)
	rec, _ := do(s, http.MethodPost, "/api/v1/namespaces/default/pods", "application/json", goodPod)
	var p v1.Pod
	_ = json.Unmarshal(rec.Body.Bytes(), &p)
	p.Spec.Containers[0].Image = "busybox:2"
	body, _ := json.Marshal(&p)
	if rec, _ := do(s, http.MethodPut, "/api/v1/namespaces/default/pods/p", "application/json", string(body)); rec.Code != http.StatusOK {
		t.Fatalf("update: %d %s", rec.Code, rec.Body)
	}
	p.Spec.Containers[0].Image = "busybox:3"
	body, _ = json.Marshal(&p) // still the old resourceVersion
	rec, st := do(s, http.MethodPut, "/api/v1/namespaces/default/pods/p", "application/json", string(body))
	if rec.Code != http.StatusConflict || st.Reason != metav1.StatusReasonConflict {
		t.Fatalf("stale update: %d %+v", rec.Code, st)
	}
	rec, _ = do(s, http.MethodGet, "/api/v1/namespaces/default/pods/p", "", "")
	_ = json.Unmarshal(rec.Body.Bytes(), &p)
	if p.Spec.Containers[0].Image != "busybox:2" {
		t.Errorf("stale write changed the pod: %s", p.Spec.Containers[0].Image)
	}
	// Immutable fields are refused with 422.
	p.Spec.Containers[0].Command = []string{"sh"}
	body, _ = json.Marshal(&p)
	if rec, st := do(s, http.MethodPut, "/api/v1/namespaces/default/pods/p", "application/json", string(body)); rec.Code != 422 || st.Reason != metav1.StatusReasonInvalid {
		t.Fatalf("immutable update: %d %+v", rec.Code, st)
	}
}

// FuzzDecodePod feeds arbitrary bodies through decoding, defaulting and
// validation: the server must answer, never panic, and store or start
// nothing (every request is a dry run). One server serves every input — a
// dry run must leave it untouched, which is checked after each input — so
// an iteration costs a request, not a checkpoint directory (see FuzzPatch
// for why that matters).
func FuzzDecodePod(f *testing.F) {
	f.Add([]byte(goodPod))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i","env":[{"name":"A","value":"$(B"}]}]}}`))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: y}\n"))
	s, rt, store := newTestServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/pods?dryRun=All", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		asAdmin(s).ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("server error %d for %q: %s", rec.Code, body, rec.Body)
		}
		if len(store.List(checkpoint.KindPod)) != 0 {
			t.Fatalf("dry run (%d) stored a pod", rec.Code)
		}
		if pods, _ := s.Registry.ListPods(""); len(pods) != 0 || len(rt.synced) != 0 {
			t.Fatalf("dry run (%d) registered (%d) or started (%d) a pod", rec.Code, len(pods), len(rt.synced))
		}
	})
}

// asAdmin serves as an admin, as the unix socket serves root.
func asAdmin(h http.Handler) http.Handler {
	return as(h, "test-admin", "system:masters")
}

// as serves as user with groups, as a verified client certificate would.
func as(h http.Handler, name string, groups ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(authn.WithUser(r.Context(), &user.DefaultInfo{Name: name, Groups: groups})))
	})
}
