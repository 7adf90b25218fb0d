package cri

import (
	"slices"
	"testing"

	introspectionapi "github.com/containerd/containerd/api/services/introspection/v1"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
)

func TestStorageRoots(t *testing.T) {
	for _, tc := range []struct {
		name    string
		plugins []*introspectionapi.Plugin
		want    []string
	}{
		{"content and overlayfs", []*introspectionapi.Plugin{
			{Type: "io.containerd.content.v1", ID: "content", Exports: map[string]string{"root": "/var/lib/containerd/io.containerd.content.v1.content"}},
			{Type: "io.containerd.snapshotter.v1", ID: "overlayfs", Exports: map[string]string{"root": "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"}},
		}, []string{"/var/lib/containerd/io.containerd.content.v1.content", "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"}},
		{"a snapshotter that did not load is left out", []*introspectionapi.Plugin{
			{Type: "io.containerd.snapshotter.v1", ID: "btrfs", Exports: map[string]string{"root": "/var/lib/containerd/io.containerd.snapshotter.v1.btrfs"}, InitErr: &rpcstatus.Status{Message: "not a btrfs filesystem"}},
			{Type: "io.containerd.snapshotter.v1", ID: "native", Exports: map[string]string{"root": "/r/native"}},
		}, []string{"/r/native"}},
		{"a plugin without a root", []*introspectionapi.Plugin{{Type: "io.containerd.snapshotter.v1", ID: "remote"}}, nil},
		{"none", nil, nil},
	} {
		if got := storageRoots(tc.plugins); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
