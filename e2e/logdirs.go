//go:build e2e

package e2e

import "path/filepath"

// ContainerLogDir is the daemon's --container-log-dir: the kubelet's
// /var/log/containers links, kept per test so tests never touch the host's.
func (b *Bootlet) ContainerLogDir() string { return filepath.Join(b.Ctrd.Dir, "containers") }
