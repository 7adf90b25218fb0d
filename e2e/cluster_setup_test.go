//go:build e2e

package e2e

import (
	"strings"
	"testing"
)

func TestReadRouterJournal(t *testing.T) {
	const (
		routed   = `I1128 router.go:398] "reuseport: route" port=6443 target="1732286" loopback="" why="pid 659's listener serves"`
		noTarget = `I1128 router.go:398] "reuseport: route" port=6443 target="" loopback="" why="no listener serves"`
		failed   = `E1128 router.go:410] "reuseport: routing failed" err="pidfd_getfd: operation not permitted"`
		again    = `I1128 router.go:415] "reuseport: routing works again"`
		lostLine = `E1128 main.go:90] "The apiserver port is not routed" err="seccomp"`
	)
	cases := []struct {
		name        string
		lines       []string
		wantRouted  int
		wantFailing string
		wantLost    int
	}{
		{"nothing yet", nil, 0, "", 0},
		{"only decisions without a target", []string{noTarget, noTarget}, 0, "", 0},
		{"a decision on a serving listener", []string{noTarget, routed}, 1, "", 0},
		{"a failure not recovered", []string{routed, failed}, 1, failed, 0},
		{"a failure recovered", []string{failed, again, routed}, 1, "", 0},
		{"not routed at all", []string{lostLine}, 0, "", 1},
	}
	for _, tc := range cases {
		gotRouted, gotFailing, gotLost := readRouterJournal(strings.Join(tc.lines, "\n"))
		if gotRouted != tc.wantRouted || gotFailing != tc.wantFailing || len(gotLost) != tc.wantLost {
			t.Errorf("%s: routed %d, failing %q, lost %d; want %d, %q, %d", tc.name, gotRouted, gotFailing, len(gotLost), tc.wantRouted, tc.wantFailing, tc.wantLost)
		}
	}
}
