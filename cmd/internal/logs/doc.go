// Package logs owns `bootlet logs`: it streams a container's log from the
// daemon's API, with kubectl's flags.
package logs
