// Package render owns `bootlet render` (bootlet-tools only): its flags build a
// manifests.Config, and manifests renders the PKI, kubeconfigs, bootstrap
// pods and self-hosted objects into the asset dir, one per --master.
package render
