// Package upgrade owns `bootlet upgrade`: it parses the verb's flags, finds
// the cluster's kubeconfig, and calls the upgrade's library (upgrade/,
// upgrade/observer). It decides nothing itself.
package upgrade
