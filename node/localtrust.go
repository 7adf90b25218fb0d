package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/podapi"
)

// configureLocalTrust applies the options to the server before it serves.
func configureLocalTrust(srv *podapi.Server, reg *podapi.Registry, o *LocalTrustOptions) error {
	srv.MaxMintValidity = o.MaxMintValidity
	srv.AddReadyCheck("checkpoint-fsync", reg.FsyncCheck(o.FsyncReadyTimeout))
	return srv.SetPodSecurity(o.PodSecurityLevel, o.PodSecurityExemptions)
}

// startReadOnlySocket serves --read-only-socket, if given.
func startReadOnlySocket(ctx context.Context, srv *podapi.Server, o *LocalTrustOptions, serveErr chan<- error) error {
	if o.ReadOnlySocket == "" {
		return nil
	}
	mode, gid := os.FileMode(0o600), -1
	if o.ReadOnlySocketGroup != "" {
		g, err := lookupGroup(o.ReadOnlySocketGroup)
		if err != nil {
			return err
		}
		mode, gid = 0o660, g
	}
	go func() { serveErr <- srv.ServeReadOnlyUnix(ctx, o.ReadOnlySocket, mode, gid) }()
	klog.InfoS("bootlet serving read-only", "socket", o.ReadOnlySocket)
	return nil
}

func lookupGroup(name string) (int, error) {
	if n, err := strconv.Atoi(name); err == nil {
		return n, nil
	}
	b, err := os.ReadFile(filepath.Join("/etc", "group"))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Split(l, ":")
		if len(f) >= 3 && f[0] == name {
			return strconv.Atoi(f[2])
		}
	}
	return 0, fmt.Errorf("--socket-group: no group %q", name)
}
