// Package apply owns `bootlet apply`'s flags: it decodes manifests
// (manifestfile.Read) and applies them through the daemon's API
// (podclient.Apply), printing kubectl's line for each object.
package apply
