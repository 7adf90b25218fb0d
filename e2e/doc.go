// Package e2e holds bootlet's end-to-end tests. They run against a real,
// private containerd (hack/containerd.sh) and, for parity and benchmarks,
// the real kubelet, all built by `make toolchain`. Build tag: e2e.
//
// A test that cannot run here (not root, missing binaries) fails loudly; it
// never skips.
package e2e
