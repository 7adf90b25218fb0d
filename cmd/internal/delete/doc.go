// Package delete owns `bootlet delete`'s flags: it deletes objects through
// the daemon's API (podclient.Delete) and, for pods, waits until they are
// gone, so a script can rely on the pod's containers being stopped when it
// returns.
package delete
