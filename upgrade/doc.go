// Package upgrade is the rule book of a Kubernetes version upgrade through
// the cluster's own API: which upgrades are refused before they start, the
// order of the steps (the version skew policy's), and what a step's gate
// verdict leads to (wait, go on, or put the component back).
//
// It is the pure core of the upgrade controller: every function takes the
// facts a controller observed and returns a decision. It makes no API
// call, reads no file and keeps no state; the controller that observes the
// cluster, records the desired version and acts on these decisions is
// built on it.
package upgrade
