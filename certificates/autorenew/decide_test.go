package autorenew

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	deadline := now.Add(30 * 24 * time.Hour)
	for _, tc := range []struct {
		name    string
		obs     Observation
		serving bool
		renew   bool
		problem string
	}{
		{name: "nothing to look at", obs: Observation{Deadline: deadline}},
		{name: "serving certificate far from expiry", obs: Observation{Deadline: deadline, OwnServing: true, ServingNotAfter: now.Add(300 * 24 * time.Hour)}},
		{name: "serving certificate within the threshold", obs: Observation{Deadline: deadline, OwnServing: true, ServingNotAfter: now.Add(24 * time.Hour)}, serving: true},
		{name: "serving certificate not bootlet's", obs: Observation{Deadline: deadline, ServingNotAfter: now.Add(24 * time.Hour)}},
		{name: "serving certificate unreadable", obs: Observation{Deadline: deadline, OwnServing: true, ServingErr: errors.New("no serving certificate loaded")}},
		{name: "asset dir: nothing expiring", obs: Observation{Deadline: deadline, AssetDir: true}},
		{name: "asset dir: a leaf expiring", obs: Observation{Deadline: deadline, AssetDir: true, Expiring: []string{"etcd/server"}}, renew: true},
		{name: "asset dir: last run failed, nothing expiring now", obs: Observation{Deadline: deadline, AssetDir: true, Pending: true}, renew: true},
		{name: "asset dir unreadable", obs: Observation{Deadline: deadline, AssetDir: true, ExpiringErr: errors.New("open pki: permission denied"), Pending: true}, problem: "permission denied"},
		{name: "expiring leaves without an asset dir to renew", obs: Observation{Deadline: deadline, Expiring: []string{"apiserver"}}},
		{name: "both", obs: Observation{Deadline: deadline, OwnServing: true, ServingNotAfter: now, AssetDir: true, Expiring: []string{"apiserver"}}, serving: true, renew: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.obs)
			if d.RenewServing != tc.serving || d.CertsRenew != tc.renew {
				t.Errorf("Decide = serving %v, certs renew %v; want %v, %v", d.RenewServing, d.CertsRenew, tc.serving, tc.renew)
			}
			got := strings.Join(d.Problems, "; ")
			if (tc.problem == "") != (got == "") || !strings.Contains(got, tc.problem) {
				t.Errorf("problems %q, want %q", got, tc.problem)
			}
		})
	}
}
