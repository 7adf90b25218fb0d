package podapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/bootlet/bootlet/checkpoint"
	btypes "github.com/bootlet/bootlet/types"
)

func doAs(h http.Handler, method, path, ct, body string) (*httptest.ResponseRecorder, metav1.Status) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var st metav1.Status
	_ = json.Unmarshal(rec.Body.Bytes(), &st)
	return rec, st
}

func TestAuthorization(t *testing.T) {
	s, _, _ := newTestServer(t)
	mustCreatePod(t, s, goodPod)
	do(s, http.MethodPost, "/api/v1/namespaces/default/secrets", "application/json", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"k":"v"}}`)
	reader := as(s, "ro", "bootlet:readers")
	other := as(s, "nobody", "some:group")
	tests := []struct {
		name         string
		h            http.Handler
		method, path string
		want         int
	}{
		{"reader gets a pod", reader, "GET", "/api/v1/namespaces/default/pods/p", 200},
		{"reader lists pods", reader, "GET", "/api/v1/pods", 200},
		{"reader watches events", reader, "GET", "/api/v1/events?watch=true&timeoutSeconds=1", 200},
		{"reader reads logs", reader, "GET", "/api/v1/namespaces/default/pods/p/log", 200},
		{"reader may not create", reader, "POST", "/api/v1/namespaces/default/pods", 403},
		{"reader may not delete", reader, "DELETE", "/api/v1/namespaces/default/pods/p", 403},
		{"reader may not read secrets", reader, "GET", "/api/v1/namespaces/default/secrets/s", 403},
		{"reader may not list secrets", reader, "GET", "/api/v1/secrets", 403},
		{"reader may not exec (GET upgrade)", reader, "GET", "/api/v1/namespaces/default/pods/p/exec?command=sh", 403},
		{"reader may not port-forward", reader, "POST", "/api/v1/namespaces/default/pods/p/portforward", 403},
		{"reader reads discovery", reader, "GET", "/api/v1", 200},
		{"reader reads metrics", reader, "GET", "/metrics", 200},
		{"other may not get", other, "GET", "/api/v1/namespaces/default/pods/p", 403},
		{"other may not list", other, "GET", "/api/v1/pods", 403},
		{"other reads discovery", other, "GET", "/api", 200},
		{"other reads healthz", other, "GET", "/healthz", 200},
		{"other may not read metrics", other, "GET", "/metrics", 403},
		{"no identity", s, "GET", "/api/v1/pods", 401},
		{"admin reads secrets", asAdmin(s), "GET", "/api/v1/namespaces/default/secrets/s", 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec, st := doAs(tc.h, tc.method, tc.path, "application/json", "{}")
			if rec.Code != tc.want {
				t.Fatalf("want %d, got %d %s", tc.want, rec.Code, rec.Body)
			}
			if tc.want == 403 && (st.Kind != "Status" || st.Reason != metav1.StatusReasonForbidden || !strings.Contains(st.Message, "cannot")) {
				t.Fatalf("403 is not a Forbidden Status: %+v", st)
			}
		})
	}
}

func TestReservationPlan(t *testing.T) {
	tests := []struct {
		rv, reserved, block uint64
		extending           bool
		sync, async         bool
	}{
		{rv: 1, reserved: 0, block: 10, sync: true},
		{rv: 2, reserved: 10, block: 10},
		{rv: 6, reserved: 10, block: 10, async: true},
		{rv: 6, reserved: 10, block: 10, extending: true},
		{rv: 10, reserved: 10, block: 10, async: true},
		{rv: 11, reserved: 10, block: 10, extending: true, sync: true},
	}
	for _, tc := range tests {
		s, a := reservationPlan(tc.rv, tc.reserved, tc.block, tc.extending)
		if s != tc.sync || a != tc.async {
			t.Errorf("%+v: got sync=%v async=%v", tc, s, a)
		}
	}
}

// TestResourceVersionsNeverGoBack: status-only updates are not written to
// the checkpoint, yet after a restart every resourceVersion is above every
// one handed out before, and a watch from before the restart gets 410.
func TestResourceVersionsNeverGoBack(t *testing.T) {
	dir := t.TempDir()
	s, _, store := newServerIn(t, dir)
	p := mustCreatePod(t, s, goodPod)
	var last string
	for i := 0; i < 30; i++ {
		s.Registry.PodStatus(btypes.PodKey{Namespace: "default", Name: "p"}, p.UID, v1.PodStatus{Phase: v1.PodRunning, Message: fmt.Sprint(i)})
		got, _ := s.Registry.GetPod("default", "p")
		last = got.ResourceVersion
	}
	lastN := rvOf(&v1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: last}})
	if store.Revision() < lastN {
		t.Fatalf("high-water mark %d below handed-out resourceVersion %d", store.Revision(), lastN)
	}
	// Restart on the same directory.
	s2, _, _ := newServerIn(t, dir)
	list, _ := do(s2, http.MethodGet, "/api/v1/pods", "", "")
	var pl v1.PodList
	_ = json.Unmarshal(list.Body.Bytes(), &pl)
	if n, _ := parseRV(pl.ResourceVersion); n <= lastN {
		t.Fatalf("list resourceVersion %s after restart is not above %d", pl.ResourceVersion, lastN)
	}
	rec, st := do(s2, http.MethodGet, "/api/v1/pods?watch=true&resourceVersion="+last, "", "")
	if rec.Code != http.StatusGone || st.Reason != metav1.StatusReasonExpired {
		t.Fatalf("watch from before the restart: want 410 Expired, got %d %+v", rec.Code, st)
	}
	// A write after the restart is above too.
	rec, _ = do(s2, http.MethodPatch, "/api/v1/namespaces/default/pods/p", "application/merge-patch+json", `{"metadata":{"labels":{"a":"b"}}}`)
	var np v1.Pod
	_ = json.Unmarshal(rec.Body.Bytes(), &np)
	if rvOf(&np) <= lastN {
		t.Fatalf("write after restart got resourceVersion %s, not above %d", np.ResourceVersion, lastN)
	}
	_ = store
}

func TestPagination(t *testing.T) {
	s, _, _ := newTestServer(t)
	for i := 0; i < 10; i++ {
		body := strings.Replace(strings.Replace(goodPod, `"name":"p"`, fmt.Sprintf(`"name":"p%d"`, i), 1), "555555555555", fmt.Sprintf("55555555555%d", i), 1)
		mustCreatePod(t, s, body)
	}
	var names []string
	cont := ""
	pages := 0
	var firstRV string
	for {
		rec, st := do(s, http.MethodGet, "/api/v1/namespaces/default/pods?limit=3&continue="+cont, "", "")
		if rec.Code != 200 {
			t.Fatalf("page: %d %+v", rec.Code, st)
		}
		var l v1.PodList
		_ = json.Unmarshal(rec.Body.Bytes(), &l)
		if pages == 0 {
			firstRV = l.ResourceVersion
			// A change between pages is not seen: pages are one snapshot.
			do(s, http.MethodDelete, "/api/v1/namespaces/default/pods/p9?gracePeriodSeconds=0", "", "")
			s.Registry.PodTerminated(btypes.PodKey{Namespace: "default", Name: "p9"}, "11111111-2222-3333-4444-555555555559")
		} else if l.ResourceVersion != firstRV {
			t.Errorf("page %d resourceVersion %s, first page %s", pages, l.ResourceVersion, firstRV)
		}
		pages++
		for _, p := range l.Items {
			names = append(names, p.Name)
		}
		if l.Continue == "" {
			break
		}
		cont = l.Continue
	}
	if len(names) != 10 || pages != 4 {
		t.Fatalf("want 10 pods in 4 pages, got %d in %d: %v", len(names), pages, names)
	}
	// A continue token older than the history is 410 Expired.
	old := WatchHistory
	WatchHistory = 2
	defer func() { WatchHistory = old }()
	rec, _ := do(s, http.MethodGet, "/api/v1/namespaces/default/pods?limit=3", "", "")
	var l v1.PodList
	_ = json.Unmarshal(rec.Body.Bytes(), &l)
	for i := 0; i < 5; i++ {
		s.Registry.PodStatus(btypes.PodKey{Namespace: "default", Name: "p0"}, "11111111-2222-3333-4444-555555555550", v1.PodStatus{Message: fmt.Sprint(i)})
	}
	if rec, st := do(s, http.MethodGet, "/api/v1/namespaces/default/pods?limit=3&continue="+l.Continue, "", ""); rec.Code != 410 || st.Reason != metav1.StatusReasonExpired {
		t.Fatalf("expired continue: %d %+v", rec.Code, st)
	}
	if rec, _ := do(s, http.MethodGet, "/api/v1/pods?continue=garbage", "", ""); rec.Code != 400 {
		t.Fatalf("bad continue: %d", rec.Code)
	}
}

func TestEventsBoundedAndWatchable(t *testing.T) {
	s, _, _ := newTestServer(t)
	l := s.Registry.Events
	now := time.Now()
	l.now = func() time.Time { return now }
	l.limit = 3
	ch, _ := openWatchPath(t, s, "/api/v1/namespaces/default/events?watch=true&fieldSelector=involvedObject.name%3Dp")
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: "u"}}
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "q", UID: "v"}}
	l.Event(other, "Normal", "Pulled", "x")
	l.Event(pod, "Normal", "Started", "y")
	ev := <-ch
	if ev.Type != "ADDED" || !strings.Contains(string(ev.Object), `"Started"`) {
		t.Fatalf("field-selected watch: %s %s", ev.Type, ev.Object)
	}
	for i := 0; i < 3; i++ {
		l.Event(other, "Normal", "R", fmt.Sprint(i))
	}
	if ev := <-ch; ev.Type != "DELETED" {
		t.Fatalf("past the limit the oldest go: want DELETED of p's event, got %s", ev.Type)
	}
	evs, _ := l.store.List("")
	if len(evs) != 3 {
		t.Fatalf("limit 3, have %d", len(evs))
	}
	now = now.Add(DefaultEventTTL + time.Second)
	l.Event(other, "Normal", "Late", "z")
	if evs, _ := l.store.List(""); len(evs) != 1 || evs[0].Reason != "Late" {
		t.Fatalf("expired events stay: %d", len(evs))
	}
	rec, _ := do(s, http.MethodGet, "/api/v1/events?fieldSelector=reason%3DLate", "", "")
	if !strings.Contains(rec.Body.String(), `"Late"`) {
		t.Fatalf("list with field selector: %s", rec.Body)
	}
}

func openWatchPath(t *testing.T, s *Server, path string) (<-chan streamedEvent, *http.Response) {
	t.Helper()
	hs := httptest.NewServer(asAdmin(s))
	t.Cleanup(hs.Close)
	resp, err := http.Get(hs.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	ch := make(chan streamedEvent, 100)
	go func() {
		defer close(ch)
		dec := json.NewDecoder(resp.Body)
		for {
			var ev streamedEvent
			if dec.Decode(&ev) != nil {
				return
			}
			ch <- ev
		}
	}()
	return ch, resp
}

func TestAggregatedDiscovery(t *testing.T) {
	s, _, _ := newTestServer(t)
	for _, path := range []string{"/api", "/apis"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json")
		rec := httptest.NewRecorder()
		asAdmin(s).ServeHTTP(rec, req)
		if rec.Header().Get("Content-Type") != AggregatedContentType {
			t.Fatalf("%s: content type %q", path, rec.Header().Get("Content-Type"))
		}
		var l apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if path == "/apis" {
			continue
		}
		if len(l.Items) != 1 || l.Items[0].Versions[0].Version != "v1" {
			t.Fatalf("/api: %s", rec.Body)
		}
		found := false
		for _, r := range l.Items[0].Versions[0].Resources {
			if r.Resource == "pods" {
				for _, sr := range r.Subresources {
					found = found || sr.Subresource == "log"
				}
			}
		}
		if !found {
			t.Fatalf("pods/log not a subresource of pods: %s", rec.Body)
		}
	}
	// Without the aggregated type, the legacy document.
	if rec, _ := do(s, http.MethodGet, "/api", "", ""); !strings.Contains(rec.Body.String(), `"APIVersions"`) {
		t.Fatalf("legacy /api: %s", rec.Body)
	}
}

var _ = checkpoint.KindPod
var _ user.Info

// TestFullDiskEventsDoNotRecurse: once the resourceVersion reservation
// fails (the disk is full), a failing write records one
// CheckpointWriteFailed event, which is listed, and recording it records
// nothing more. Before, each dropped event queued another node event about
// itself: unbounded recursion, log lines and memory.
func TestFullDiskEventsDoNotRecurse(t *testing.T) {
	s, _, _ := newTestServer(t)
	mustCreatePod(t, s, goodPod)
	var attempts atomic.Int64
	hwm := s.Registry.c.hwm
	hwm.mu.Lock()
	hwm.reserved = s.Registry.c.rv // the block is used up
	hwm.reserve = func(uint64) error {
		if attempts.Add(1) > 100 {
			panic("reservation retried without end: events recurse on their own failure")
		}
		return errors.New("write revision: no space left on device")
	}
	hwm.mu.Unlock()

	rec, st := do(s, http.MethodPatch, "/api/v1/namespaces/default/pods/p", "application/merge-patch+json", `{"metadata":{"labels":{"a":"b"}}}`)
	if rec.Code != http.StatusInternalServerError || !strings.Contains(st.Message, "no space left") {
		t.Fatalf("patch on a full disk: want 500 naming the cause, got %d %q", rec.Code, st.Message)
	}
	// The write's reservation, then the CheckpointWriteFailed event's.
	if n := attempts.Load(); n != 2 {
		t.Errorf("%d reservation attempts for one failed write; want 2 (the write, its event)", n)
	}
	// The event itself lives in memory: it is listed, with an unreserved
	// version, so clients see why writes fail.
	found := false
	for _, e := range s.Registry.Events.store.items {
		if e.Reason == "CheckpointWriteFailed" && strings.Contains(e.Message, "no space left") {
			found = true
		}
	}
	if !found {
		t.Error("no CheckpointWriteFailed event listed while the reservation fails")
	}
	s.Registry.Events.NodeEvent("node1", v1.EventTypeWarning, "CheckpointWriteFailed", "again")
	if n := attempts.Load(); n != 3 {
		t.Errorf("%d reservation attempts after one more node event; want 3", n)
	}
	got, _ := s.Registry.GetPod("default", "p")
	if got.Labels["a"] == "b" {
		t.Error("the failed patch is visible")
	}
}
