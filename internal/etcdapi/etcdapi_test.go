package etcdapi

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// A member is healthy when its own status names a leader and no error: an
// answer alone (a member cut off from the others, or one with an alarm)
// is not a voter the quorum may count on.
func TestStatusHealthy(t *testing.T) {
	tests := []struct {
		name string
		st   *pb.StatusResponse
		want bool
	}{
		{"follows a leader", &pb.StatusResponse{Leader: 7}, true},
		{"no leader (cut off, or an election)", &pb.StatusResponse{}, false},
		{"an alarm", &pb.StatusResponse{Leader: 7, Errors: []string{"memberID:1 alarm:NOSPACE"}}, false},
	}
	for _, tt := range tests {
		if got := StatusHealthy(tt.st); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
