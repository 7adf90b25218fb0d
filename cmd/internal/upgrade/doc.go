// Package upgrade owns `bootlet upgrade`: it parses the verb's flags, finds
// the cluster's kubeconfig, builds the clients, and calls the upgrade's
// library (upgrade/observer for plan, upgrade/follow for apply and
// status, upgrade/nodeagent for agent, which a worker runs as its unit
// since it has no daemon to run it). It decides nothing itself.
package upgrade
