// Package follow is the person's side of an upgrade, what `bootlet upgrade
// apply` and `bootlet upgrade status` do: it refuses to ask for a version
// that `bootlet upgrade plan` refuses, sets the desired version on the
// ClusterVersion, follows the status the upgrade controller writes, and
// prints where the upgrade stands.
//
// It talks to the cluster only through its API: the ClusterVersion through
// upgrade/cvclient and a dynamic client, the plan through upgrade/observer.
// It never writes the status (the controller's), never moves a component
// itself, and must not import the daemon's packages. It keeps no state:
// the upgrade goes on without it, so an interrupted command, or one run
// from another machine, shows the same upgrade from the object alone.
package follow
