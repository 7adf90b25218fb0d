// Package cri owns everything bootlet says to the container runtime: the CRI
// client, the Pod → PodSandboxConfig/ContainerConfig conversion (which must be
// byte-for-byte what the kubelet would send for the same static pod), image
// ensure/pull, OCI archive import through the containerd v2 client, and a file
// read out of an imported image's layers (extract.go).
//
// It must not hold pod lifecycle state or decide what to run: that is package runner's
// job. Conversions here are pure functions of their inputs; the only I/O is in
// runtime.go (gRPC), images.go (image service, archive import) and extract.go
// (the content store, and the file written by checkpoint.WriteFilesAtomic).
package cri
