package daemon

import (
	"context"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/podapi"
)

// localTrustOptions are the flags of what the local API trusts: a slow
// disk on /readyz, minted credentials, the read-only socket and Pod
// Security admission.
type localTrustOptions struct {
	fsyncReadyTimeout     time.Duration
	maxMintValidity       time.Duration
	readOnlySocket        string
	readOnlySocketGroup   string
	podSecurityLevel      string
	podSecurityExemptions []string
}

func addLocalTrustFlags(f *pflag.FlagSet, o *localTrustOptions) {
	f.DurationVar(&o.fsyncReadyTimeout, "fsync-ready-timeout", podapi.DefaultFsyncReadyTimeout, "/readyz fails (check checkpoint-fsync) while a checkpoint fsync has been pending this long: writes wait for the disk, reads go on; 0: never")
	f.DurationVar(&o.maxMintValidity, "kubeconfig-max-validity", podapi.DefaultMaxMintValidity, "longest lifetime of a client certificate `bootlet kubeconfig` mints (also its default); a longer --validity is refused with 422")
	f.StringVar(&o.readOnlySocket, "read-only-socket", "", "also serve a read-only API on this unix socket: get, list, watch (not Secrets) and logs; every write, exec, attach, port-forward and minting is refused with 403. Empty: none")
	f.StringVar(&o.readOnlySocketGroup, "read-only-socket-group", "", "group that may use --read-only-socket (makes it 0660; otherwise 0600, root only)")
	f.StringVar(&o.podSecurityLevel, "pod-security-level", "", "Pod Security Standards level (privileged, baseline or restricted) every pod created through the API must meet, unless its creator is in a --pod-security-exempt-group; refusals are 403 as the apiserver's PodSecurity admission. Empty: no check")
	f.StringSliceVar(&o.podSecurityExemptions, "pod-security-exempt-group", podapi.DefaultPodSecurityExemptGroups, "groups exempt from --pod-security-level (the main socket's users act as the first --admin-group)")
}

// configureLocalTrust applies the options to the server before it serves.
func configureLocalTrust(srv *podapi.Server, reg *podapi.Registry, o *localTrustOptions) error {
	srv.MaxMintValidity = o.maxMintValidity
	srv.AddReadyCheck("checkpoint-fsync", reg.FsyncCheck(o.fsyncReadyTimeout))
	return srv.SetPodSecurity(o.podSecurityLevel, o.podSecurityExemptions)
}

// startReadOnlySocket serves --read-only-socket, if given.
func startReadOnlySocket(ctx context.Context, srv *podapi.Server, o *localTrustOptions, serveErr chan<- error) error {
	if o.readOnlySocket == "" {
		return nil
	}
	mode, gid := os.FileMode(0o600), -1
	if o.readOnlySocketGroup != "" {
		g, err := lookupGroup(o.readOnlySocketGroup)
		if err != nil {
			return err
		}
		mode, gid = 0o660, g
	}
	go func() { serveErr <- srv.ServeReadOnlyUnix(ctx, o.readOnlySocket, mode, gid) }()
	klog.InfoS("bootlet serving read-only", "socket", o.readOnlySocket)
	return nil
}
