// Package describe owns `bootlet describe` (bootlet-tools only): kubectl's own
// describers over the daemon's API, so the output is what operators know.
// kubectl's libraries are why it is not in bootlet's binary.
package describe
