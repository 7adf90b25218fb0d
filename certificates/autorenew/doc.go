// Package autorenew is the daemon's automatic certificate renewal
// (--cert-renew-before), a controller in the house style: observe the
// expiries, a pure Decide, act. At the daemon's start and hourly it renews
// what expires within the threshold: bootlet's own serving certificate in
// place (apitls.RenewServingCert, served from the next handshake), and the
// asset dir's leaves by running `bootlet-tools certs renew`, the same code
// an operator runs (package certificates). Running the tool instead of
// calling package certificates keeps render's libraries out of the
// daemon's binary; this package links none of them.
package autorenew
