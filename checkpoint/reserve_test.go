package checkpoint

import "testing"

// TestReserveSurvivesReopen: a reservation is durable, only moves forward,
// and later Puts number above it.
func TestReserveSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve(500); err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve(100); err != nil || s.Revision() != 500 {
		t.Fatalf("a lower reservation moved the counter back: %d %v", s.Revision(), err)
	}
	r, err := s.Put(KindConfigMap, "default", "a", []byte(`{"a":1}`))
	if err != nil || r.Revision != 501 {
		t.Fatalf("put after reserve: %d %v", r.Revision, err)
	}
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Revision() < 501 {
		t.Fatalf("reopened at %d, below the reservation", s2.Revision())
	}
}
