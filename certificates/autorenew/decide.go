package autorenew

import "time"

// Observation is what one check sees.
type Observation struct {
	// Deadline is now plus the threshold: what expires before it is
	// renewed.
	Deadline time.Time
	// OwnServing: bootlet made its serving certificate and may renew it;
	// ServingNotAfter is when it expires, ServingErr why it could not be
	// read (logged, not reported: the TCP listener would fail louder).
	OwnServing      bool
	ServingNotAfter time.Time
	ServingErr      error
	// AssetDir: the daemon renews an asset dir (it pivots a control
	// plane); Expiring are its leaves that expire before Deadline,
	// ExpiringErr why they could not be read.
	AssetDir    bool
	Expiring    []string
	ExpiringErr error
	// Pending: the last `certs renew` failed, so the files may be renewed
	// and the cluster's copies not.
	Pending bool
}

// Decision is what one check does.
type Decision struct {
	// RenewServing: re-issue bootlet's serving certificate.
	RenewServing bool
	// CertsRenew: run `certs renew --expiring-within`, even with nothing
	// expiring when the last run failed (the same command finishes it).
	CertsRenew bool
	// Problems are failures of the observation itself, reported with the
	// renewal's.
	Problems []string
}

// Decide is what to renew. Pure.
func Decide(o Observation) Decision {
	var d Decision
	if o.OwnServing {
		d.RenewServing = o.ServingErr == nil && o.ServingNotAfter.Before(o.Deadline)
	}
	if o.AssetDir {
		switch {
		case o.ExpiringErr != nil:
			d.Problems = append(d.Problems, o.ExpiringErr.Error())
		case len(o.Expiring) > 0 || o.Pending:
			d.CertsRenew = true
		}
	}
	return d
}
