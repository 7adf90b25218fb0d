// Package config owns the daemon's configuration file: the versioned
// BootletConfiguration type (bootlet.dev/v1alpha1, in the manner of the
// kubelet's KubeletConfiguration), its defaults, its strict decoding and its
// validation.
//
// It is pure: it reads no file, looks nothing up on the host and starts
// nothing; paths are resolved against a directory its caller names. It
// imports only apimachinery, the pod-security-admission API, sigs.k8s.io's
// JSON and YAML and bootlet's types, and must not import a package of the
// daemon (podapi, runner, handoff, …): their defaults are repeated here as
// constants, and cmd/internal/daemon's tests hold both copies equal. How a field
// reaches the daemon (the flag it stands for, flags winning over the file)
// is cmd/internal/daemon's business, not this package's.
package config
