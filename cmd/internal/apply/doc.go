// Package apply owns `bootlet apply`: it decodes manifests (cli.ReadManifests)
// and creates each object, or replaces it when it differs, through the
// daemon's API, as kubectl apply does for the fields a pod update may change.
package apply
