package daemon

import (
	"github.com/spf13/pflag"

	"github.com/bootlet/bootlet/node"
	"github.com/bootlet/bootlet/podapi"
)

func addLocalTrustFlags(f *pflag.FlagSet, o *node.LocalTrustOptions) {
	f.DurationVar(&o.FsyncReadyTimeout, "fsync-ready-timeout", podapi.DefaultFsyncReadyTimeout, "/readyz fails (check checkpoint-fsync) while a checkpoint fsync has been pending this long: writes wait for the disk, reads go on; 0: never")
	f.DurationVar(&o.MaxMintValidity, "kubeconfig-max-validity", podapi.DefaultMaxMintValidity, "longest lifetime of a client certificate `bootlet kubeconfig` mints (also its default); a longer --validity is refused with 422")
	f.StringVar(&o.ReadOnlySocket, "read-only-socket", "", "also serve a read-only API on this unix socket: get, list, watch (not Secrets) and logs; every write, exec, attach, port-forward and minting is refused with 403. Empty: none")
	f.StringVar(&o.ReadOnlySocketGroup, "read-only-socket-group", "", "group that may use --read-only-socket (makes it 0660; otherwise 0600, root only)")
	f.StringVar(&o.PodSecurityLevel, "pod-security-level", "", "Pod Security Standards level (privileged, baseline or restricted) every pod created through the API must meet, unless its creator is in a --pod-security-exempt-group; refusals are 403 as the apiserver's PodSecurity admission. Empty: no check")
	f.StringSliceVar(&o.PodSecurityExemptions, "pod-security-exempt-group", podapi.DefaultPodSecurityExemptGroups, "groups exempt from --pod-security-level (the main socket's users act as the first --admin-group)")
}
