package podapi

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSlowDiskReadsAnswerAndReadyzFails: while a write hangs in fsync, get,
// list and watch still answer from memory, the write is not acknowledged,
// and /readyz names the stuck fsync once it has been pending longer than
// the threshold.
func TestSlowDiskReadsAnswerAndReadyzFails(t *testing.T) {
	s, _, store := newTestServer(t)
	s.AddReadyCheck("checkpoint-fsync", s.Registry.FsyncCheck(2*time.Second))
	s.SetReady()
	mustCreatePod(t, s, goodPod)

	waiting, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	store.SetFsyncHook(func(string) {
		once.Do(func() { close(waiting) })
		<-release
	})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	created := make(chan int, 1)
	go func() {
		rec, _ := do(s, http.MethodPost, "/api/v1/namespaces/default/pods", "application/json",
			strings.Replace(strings.Replace(goodPod, `"p"`, `"q"`, 1), `555555555555"`, `555555555556"`, 1))
		created <- rec.Code
	}()
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the create never reached fsync")
	}
	hung := time.Now()
	if rec, _ := do(s, http.MethodGet, "/readyz", "", ""); rec.Code != 200 {
		t.Errorf("/readyz failed before the threshold: %d %s", rec.Code, rec.Body)
	}

	answered := make(chan struct{})
	go func() {
		defer close(answered)
		if rec, _ := do(s, http.MethodGet, "/api/v1/namespaces/default/pods/p", "", ""); rec.Code != 200 {
			t.Errorf("get while the disk hangs: %d %s", rec.Code, rec.Body)
		}
		if rec, _ := do(s, http.MethodGet, "/api/v1/namespaces/default/pods/q", "", ""); rec.Code != 404 {
			t.Errorf("the unacknowledged pod is visible: %d", rec.Code)
		}
		if rec, _ := do(s, http.MethodGet, "/api/v1/pods", "", ""); rec.Code != 200 {
			t.Errorf("list while the disk hangs: %d %s", rec.Code, rec.Body)
		}
		if rec, _ := do(s, http.MethodGet, "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1", "", ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"ADDED"`) {
			t.Errorf("watch while the disk hangs: %d %s", rec.Code, rec.Body)
		}
	}()
	select {
	case <-answered:
	case <-time.After(5 * time.Second):
		t.Fatal("reads blocked behind a hung fsync")
	}
	select {
	case code := <-created:
		t.Fatalf("the create was answered (%d) before its fsync finished", code)
	default:
	}

	time.Sleep(time.Until(hung.Add(2500 * time.Millisecond)))
	rec, _ := do(s, http.MethodGet, "/readyz", "", "")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "[-]checkpoint-fsync failed: an fsync has been pending for") {
		t.Fatalf("/readyz with an fsync pending past the threshold: %d %s", rec.Code, rec.Body)
	}

	released = true
	close(release)
	if code := <-created; code != http.StatusCreated {
		t.Fatalf("create after the disk recovered: %d", code)
	}
	if rec, _ := do(s, http.MethodGet, "/readyz", "", ""); rec.Code != 200 {
		t.Fatalf("/readyz after the disk recovered: %d %s", rec.Code, rec.Body)
	}
}
