// Package delete owns `bootlet delete`: it deletes objects through the daemon's
// API and, for pods, waits until they are gone, so a script can rely on the
// pod's containers being stopped when it returns.
package delete
