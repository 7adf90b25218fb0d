// Package systemd holds no Go code: dist/systemd is the node's systemd units
// (bootlet-containerd.service, bootlet.service, bootlet-kubelet.service; a
// worker's bootlet-kubelet-worker.service and bootlet-upgrade-agent.service),
// containerd's config and the default /etc/default/bootlet that `make
// install` puts in place (hack/install.sh). Its tests install them into a
// temporary DESTDIR, check them with systemd-analyze verify, and check their
// boot order against the one `make reboot` (hack/up.sh) runs.
package systemd
