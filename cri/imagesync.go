package cri

import (
	"context"
	"fmt"
	"os"

	introspectionapi "github.com/containerd/containerd/api/services/introspection/v1"
	containerd "github.com/containerd/containerd/v2/client"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// An import is durable when it says it is done. containerd commits an
// image's metadata and content blobs with fsync, but the snapshots it
// unpacks are plain files left in the page cache: a power loss right after
// an air-gapped first boot's import could leave a committed snapshot whose
// files never reached the disk. Left to the kernel, the same data (about
// 450 MB for the control-plane images) is written back some 30 s later
// (vm.dirty_expire_centisecs), which is when the control plane starts: on
// ext4 every fsync then waits behind it, etcd's WAL fsyncs included, and a
// single-member etcd answers no read while its raft loop waits
// (docs/design/pivot.md, "The image import's writeback"). So the import
// ends with a syncfs of each filesystem containerd unpacks and stores
// content in.

// syncImported syncs the filesystems of containerd's content store and
// snapshotters. When containerd's roots are not visible from here (another
// mount namespace), it syncs every filesystem instead.
func syncImported(ctx context.Context, client *containerd.Client) error {
	resp, err := client.IntrospectionService().Plugins(ctx, "type==io.containerd.content.v1", "type==io.containerd.snapshotter.v1")
	if err != nil {
		return fmt.Errorf("listing containerd's content and snapshotter roots: %w", err)
	}
	roots := storageRoots(resp.Plugins)
	synced := map[uint64]bool{}
	for _, root := range roots {
		var st unix.Stat_t
		if err := unix.Stat(root, &st); err != nil {
			klog.V(2).InfoS("containerd's root is not visible here; syncing every filesystem", "root", root, "err", err)
			unix.Sync()
			return nil
		}
		if synced[st.Dev] {
			continue
		}
		if err := syncfs(root); err != nil {
			return err
		}
		synced[st.Dev] = true
	}
	if len(roots) == 0 {
		unix.Sync()
	}
	return nil
}

// storageRoots are the "root" exports of the plugins that loaded: the
// directories containerd writes image content and snapshots under.
func storageRoots(plugins []*introspectionapi.Plugin) []string {
	var roots []string
	for _, p := range plugins {
		if p.InitErr != nil {
			continue
		}
		if root := p.Exports["root"]; root != "" {
			roots = append(roots, root)
		}
	}
	return roots
}

func syncfs(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}
