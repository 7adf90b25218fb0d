// Package version owns `bootlet version`.
package version
