package upgrade

import (
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	btypes "github.com/bootlet/bootlet/types"
)

// The apiserver's etcd endpoints around etcd's steps.
//
// A master's apiserver names its own member only (--etcd-servers, kubeadm's
// stacked etcd). While that member's container is replaced, the apiserver
// has no etcd for seconds: the restart, then the gRPC client's reconnect
// backoff (measured: 8 to 9 s of failed lists on the API address's holder,
// until keepalived moved the address away). So for etcd's steps the
// apiservers name every member after their own: the etcd client's
// round-robin leaves a member that closes its connections (etcd's graceful
// stop) and the others answer. Not for good: the client keeps a member of a
// powered-off master in its round-robin until its keepalive gives up (30 s
// plus 10 s in the apiserver), a request sent there hangs, and the address's
// failover would no longer be a second's. The apiserver's own step, which
// comes next, puts the single endpoint back.

// A member that shares its client address.
//
// The widening above costs two rolls of every apiserver per member's step
// where helpers are added, one for all on three members, and on a small
// machine a roll is what the strict clients feel: a starting apiserver
// takes the CPU the serving ones need (docs/records, 2026-11-30). So render
// starts every member with etcd's --socket-reuse-port, and a member's step
// then names no new endpoint at all: its first helper, once a voter, is
// started again listening on the member's loopback client address too,
// the one its apiserver names. While the member restarts, the apiserver's
// etcd client reconnects to that address and the helper answers; once the
// member is back, the helper stops (its connections move to the member)
// and is removed. A learner never listens there: it refuses the requests
// the apiserver makes.

// ArgEtcdSocketReusePort is etcd's flag that lets another process listen
// on its client and peer addresses (SO_REUSEPORT).
const ArgEtcdSocketReusePort = "--socket-reuse-port"

// EtcdSharesClientAddress reports whether every etcd member in pods (its
// helpers aside) runs with --socket-reuse-port=true, so that a helper may
// listen on its client address; false with none.
func EtcdSharesClientAddress(pods []v1.Pod) bool {
	n := 0
	for _, p := range pods {
		if btypes.IsEtcdUpgradeHelper(&p) || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Spec.Containers {
			if componentOfContainer[c.Name] != Etcd {
				continue
			}
			if !EtcdSharesAddress(c.Command) {
				return false
			}
			n++
		}
	}
	return n > 0
}

// EtcdSharesAddress reports whether an etcd command says
// --socket-reuse-port=true (or the flag alone).
func EtcdSharesAddress(command []string) bool {
	for _, a := range command {
		if a == ArgEtcdSocketReusePort || a == ArgEtcdSocketReusePort+"=true" {
			return true
		}
	}
	return false
}

// ArgEtcdServers is the apiserver's flag that names its etcd endpoints.
const ArgEtcdServers = "--etcd-servers"

// EtcdClientURLs are the client URLs etcd's members advertise
// (--advertise-client-urls of each etcd container in pods), in order, each
// once.
func EtcdClientURLs(pods []v1.Pod) []string {
	var out []string
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			if componentOfContainer[c.Name] != Etcd {
				continue
			}
			v, _ := flagValue(append(slices.Clone(c.Command), c.Args...), "--advertise-client-urls")
			for _, u := range strings.Split(v, ",") {
				if u != "" && !slices.Contains(out, u) {
					out = append(out, u)
				}
			}
		}
	}
	return out
}

// WidenEtcdServers is the apiserver's command with every URL of members
// that its --etcd-servers lacks appended, its own endpoints first; changed
// false when it names them all already (or has no such flag, which then
// stays as it is).
func WidenEtcdServers(command, members []string) (out []string, changed bool) {
	cur, i := flagValue(command, ArgEtcdServers)
	if i < 0 {
		return command, false
	}
	urls := strings.Split(cur, ",")
	for _, m := range members {
		if !slices.Contains(urls, m) {
			urls = append(urls, m)
			changed = true
		}
	}
	if !changed {
		return command, false
	}
	out = slices.Clone(command)
	out[i] = ArgEtcdServers + "=" + strings.Join(urls, ",")
	return out, true
}

// SetEtcdServers is the apiserver's command with --etcd-servers=value;
// changed false when it says so already or has no such flag.
func SetEtcdServers(command []string, value string) (out []string, changed bool) {
	cur, i := flagValue(command, ArgEtcdServers)
	if i < 0 || cur == value {
		return command, false
	}
	out = slices.Clone(command)
	out[i] = ArgEtcdServers + "=" + value
	return out, true
}

// DaemonSetRolledOut: every pod the DaemonSet schedules runs its current
// spec and is Ready, and no surge pod is left.
func DaemonSetRolledOut(ds *appsv1.DaemonSet) bool {
	st := ds.Status
	return st.DesiredNumberScheduled > 0 && st.ObservedGeneration >= ds.Generation && st.UpdatedNumberScheduled == st.DesiredNumberScheduled &&
		st.NumberReady == st.DesiredNumberScheduled && st.CurrentNumberScheduled == st.DesiredNumberScheduled && st.NumberUnavailable == 0
}

// EtcdServersOf is the value of --etcd-servers in command ("" none).
func EtcdServersOf(command []string) string {
	v, _ := flagValue(command, ArgEtcdServers)
	return v
}

// flagValue is the value of the flag name written as name=value in args,
// and its index (-1: absent).
func flagValue(args []string, name string) (string, int) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, i
		}
	}
	return "", -1
}
