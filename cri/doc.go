// Package cri owns everything bootlet says to the container runtime: the CRI
// client, the Pod → PodSandboxConfig/ContainerConfig conversion (which must be
// byte-for-byte what the kubelet would send for the same static pod), image
// ensure/pull, and OCI archive import through the containerd v2 client.
//
// It must not hold pod lifecycle state or decide what to run: that is package runner's
// job. Conversions here are pure functions of their inputs; the only I/O is in
// runtime.go (gRPC) and images.go (image service, archive import).
package cri
