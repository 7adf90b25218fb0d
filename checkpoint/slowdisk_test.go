package checkpoint

import (
	"sync"
	"testing"
	"time"
)

// hungDisk is a SetFsyncHook that holds every fsync until released, and
// says when the first one is waiting.
type hungDisk struct {
	waiting chan string
	release chan struct{}
	once    sync.Once
}

func newHungDisk() *hungDisk {
	return &hungDisk{waiting: make(chan string, 1), release: make(chan struct{})}
}

func (h *hungDisk) hook(path string) {
	h.once.Do(func() { h.waiting <- path })
	<-h.release
}

// TestReadsAnswerWhileAnFsyncHangs: a write stuck in fsync holds other
// writers, never readers; the write becomes visible only once durable, and
// FsyncPending reports how long the disk has been stuck.
func TestReadsAnswerWhileAnFsyncHangs(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(KindPod, "ns", "old", []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	disk := newHungDisk()
	s.SetFsyncHook(disk.hook)
	putDone := make(chan error, 1)
	go func() {
		_, err := s.Put(KindPod, "ns", "new", []byte(`{"b":2}`))
		putDone <- err
	}()
	select {
	case <-disk.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the write never reached fsync")
	}

	reads := make(chan struct{})
	go func() {
		defer close(reads)
		if _, ok := s.Get(KindPod, "ns", "old"); !ok {
			t.Error("Get: the stored record is missing")
		}
		if _, ok := s.Get(KindPod, "ns", "new"); ok {
			t.Error("Get: a record is visible before its fsync finished")
		}
		if n := len(s.List(KindPod)); n != 1 {
			t.Errorf("List: %d records, want 1", n)
		}
		_ = s.Revision()
		_ = s.Quarantined()
	}()
	select {
	case <-reads:
	case <-time.After(5 * time.Second):
		t.Fatal("reads blocked behind a hung fsync")
	}
	time.Sleep(50 * time.Millisecond)
	if p := s.FsyncPending(); p < 50*time.Millisecond {
		t.Errorf("FsyncPending = %v while an fsync hangs, want >= 50ms", p)
	}
	select {
	case err := <-putDone:
		t.Fatalf("the write was acknowledged before its fsync finished (err %v)", err)
	default:
	}

	close(disk.release)
	if err := <-putDone; err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get(KindPod, "ns", "new"); !ok {
		t.Error("the acknowledged write is not visible")
	}
	if p := s.FsyncPending(); p != 0 {
		t.Errorf("FsyncPending = %v after the disk recovered, want 0", p)
	}
}

func TestSyncWatchPendingIsTheOldest(t *testing.T) {
	var w syncWatch
	if p := w.pending(time.Now()); p != 0 {
		t.Fatalf("pending with nothing in flight = %v", p)
	}
	end1 := w.begin("a")
	time.Sleep(20 * time.Millisecond)
	end2 := w.begin("b")
	if p := w.pending(time.Now()); p < 20*time.Millisecond {
		t.Errorf("pending = %v, want the oldest (>= 20ms)", p)
	}
	end1()
	if p := w.pending(time.Now()); p >= 20*time.Millisecond {
		t.Errorf("pending = %v after the oldest ended", p)
	}
	end2()
	if p := w.pending(time.Now()); p != 0 {
		t.Errorf("pending = %v with nothing in flight", p)
	}
}
