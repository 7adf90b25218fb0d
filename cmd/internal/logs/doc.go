// Package logs owns `bootlet logs`'s flags: it streams a container's log
// from the daemon's API (podclient.Logs), with kubectl's flags.
package logs
