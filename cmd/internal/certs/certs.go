package certs

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bootlet/bootlet/certificates"
	"github.com/bootlet/bootlet/cmd/internal/cli"
)

// NewCommand is `certs` with check-expiration and renew; package
// certificates does the work.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{Use: cli.CertsUse, Short: cli.CertsShort}
	o := certificates.CheckOptions{}
	p := paths{&o.AssetDir, &o.RootDir, &o.Kubeconfig, &o.ServingCert}
	check := &cobra.Command{
		Use:   "check-expiration",
		Short: "List every certificate bootlet rendered or minted, where each copy lives and when it expires",
		Long: `List every certificate bootlet rendered or minted and when it expires, as kubeadm certs
check-expiration does, one row per copy (WHERE):

  file pki/...               the certificates under --asset-dir/pki
  kubeconfig NAME.conf        the client certificates and CAs embedded in --asset-dir/*.conf
  secret NS/NAME KEY (...)    the self-hosted control plane's Secrets: read from the apiserver
                              with --kubeconfig ("(apiserver)"), else from the rendered
                              self-hosted/*.yaml ("(self-hosted/FILE)")
  mirror DIR/PATH             this master's copies of those Secrets, the files the control
                              plane's pods mount (bootlet keeps them in line with the apiserver)
  checkpoint secret NS/NAME KEY   the copies in the daemon's checkpoint store (--root-dir)
  bootlet serving|ca PATH     the daemon's own TCP serving certificate and CA

Copies of one certificate whose bytes differ from its first copy (the file under pki/) are
flagged as differing. The command fails, naming them, when a certificate has expired or
expires within --warn-within, or when a certificate cannot be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return p.run(cmd, func() error {
				return certificates.CheckExpiration(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr(), time.Now())
			})
		},
	}
	f := check.Flags()
	p.addFlags(f, pathHelp{
		assetDir:    "the directory `bootlet render` wrote (empty: skip the files, kubeconfigs and rendered Secrets)",
		kubeconfig:  "read the self-hosted Secrets from this cluster (default: from the rendered self-hosted/*.yaml)",
		servingCert: "the daemon's serving certificate (its --tls-cert-file; default ROOT/pki/apiserver.crt)",
	})
	f.StringVarP(&o.Output, "output", "o", "table", "output format: table or json")
	f.DurationVar(&o.WarnWithin, "warn-within", 30*24*time.Hour, "fail when a certificate expires within this duration (or has expired)")
	// render's flag is --asset-dir; accept the plural too.
	f.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "assets-dir" {
			name = "asset-dir"
		}
		return pflag.NormalizedName(name)
	})
	cmd.AddCommand(check, newRenewCmd()) // certsrenew.go
	return cmd
}
