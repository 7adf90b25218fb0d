// Package images owns `bootlet images import`: it imports image archives into
// containerd directly (package cri), without the daemon, so images can be
// loaded before bootlet or the kubelet run.
package images
