package certs

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/certificates"
)

func newRenewCmd() *cobra.Command {
	o := certificates.RenewOptions{}
	p := paths{&o.AssetDir, &o.RootDir, &o.Kubeconfig, &o.ServingCert}
	cmd := &cobra.Command{
		Use:   "renew all|NAME...",
		Short: "Renew certificates with the same CA, online: files, kubeconfigs, the Secrets in the apiserver, the checkpoints, bootlet's serving certificate",
		Long: `Renew leaf certificates as kubeadm certs renew does (the same CA, subject, SANs and usages, a
fresh validity of the same length; here also the same key), everywhere each copy lives, without
stopping the control plane:

  1. the files under --asset-dir/pki (each replaced atomically), then the kubeconfigs
     (--asset-dir/*.conf) and the rendered self-hosted/*.yaml Secrets that embed them;
  2. bootlet's own serving certificate (ROOT/pki/apiserver.crt, named bootlet-serving), which the
     daemon serves from its next TLS handshake on;
  3. the self-hosted Secrets kube-system/kube-apiserver, kube-controller-manager and kube-scheduler
     in the apiserver (--kubeconfig, default --asset-dir/admin.conf), which bootlet on every master
     copies to the directory the components mount;
  4. the components pick them up: the apiserver and etcd reload their certificates from their
     files (no restart); the controller-manager's and scheduler's Deployments (DaemonSets with
     several masters), whose kubeconfigs embed their certificates, are restarted as kubectl
     rollout restart does (2 replicas or one per master, a PDB, leader election: no outage).

It then waits (--timeout) until the apiserver serves the new certificate, this master's copy of
each changed Secret (the directory its pods mount, which bootlet keeps in line) holds the new files and the restarted Deployments or DaemonSets are rolled out. NAME is as
check-expiration prints it (apiserver, etcd/server, kubeconfig/admin, bootlet-serving, ...); with
no NAME, --expiring-within renews what expires within that duration. Files come first: a renewal cut short
is finished by running the command again.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return p.run(cmd, func() error {
				return certificates.Renew(cmd.Context(), o, args, cmd.OutOrStdout(), time.Now())
			})
		},
	}
	f := cmd.Flags()
	p.addFlags(f, pathHelp{
		assetDir:    "the directory `bootlet render` wrote",
		kubeconfig:  "the apiserver whose self-hosted Secrets to update (default: --asset-dir/admin.conf)",
		servingCert: "the daemon's serving certificate when it is not bootlet's own (--tls-cert-file): then it is not renewed here",
	})
	f.DurationVar(&o.ExpiringWithin, "expiring-within", 0, "with no NAME: renew every certificate that expires within this duration")
	f.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "how long to wait for the components to pick the new certificates up")
	f.BoolVar(&o.Offline, "offline", false, "renew the files, kubeconfigs and rendered Secrets only: no apiserver (before the first start, or while the control plane is down)")
	return cmd
}
