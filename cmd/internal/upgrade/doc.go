// Package upgrade owns `bootlet upgrade`: it parses the verb's flags, finds
// the cluster's kubeconfig, builds the clients, and calls the upgrade's
// library (upgrade/observer for plan, upgrade/follow for apply and
// status). It decides nothing itself.
package upgrade
