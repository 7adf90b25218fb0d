// Package images owns `bootlet images import`'s flags: it imports image
// archives into containerd directly (cri.ImportPaths), without the daemon,
// so images can be loaded before bootlet or the kubelet run.
package images
