package authn

import "testing"

func TestSocketPeerAllowed(t *testing.T) {
	tests := []struct {
		uid, gid  uint32
		groups    []uint32
		socketGID int
		want      bool
	}{
		{0, 0, nil, -1, true},
		{1000, 1000, nil, -1, false},
		{1000, 1000, nil, 50, false},
		{1000, 50, nil, 50, true},
		{1000, 1000, []uint32{7, 50}, 50, true},
	}
	for _, tc := range tests {
		if got := socketPeerAllowed(tc.uid, tc.gid, tc.groups, tc.socketGID); got != tc.want {
			t.Errorf("%+v: got %v", tc, got)
		}
	}
}
