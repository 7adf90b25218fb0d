package kubeconfig

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/podapi/podclient"
)

// NewCommand asks the daemon, over its unix socket (root only), for a
// kubeconfig of its TCP listener with a freshly minted client certificate.
func NewCommand(server *string) *cobra.Command {
	var user, address, validity string
	var groups []string
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print a kubeconfig for the TCP (mutual TLS) listener, with a new client certificate",
		Long: `Print a kubeconfig for the daemon's --listen address. The daemon signs a new client
certificate (CN=--user, O=--group) with its client CA; this works only over the local unix
socket, so only whoever may use the socket can mint credentials.

By default the certificate is an admin's (O=system:masters); --group=bootlet:readers makes a
read-only one (get, list and watch everything but Secrets, and logs).

The certificate lives --validity, by default and at most the daemon's --kubeconfig-max-validity
(24h unless set): bootlet keeps no revocation list. Every minting is logged and recorded as a
ClientCertificateMinted event naming the socket peer's uid.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cli.Client(server)
			if err != nil {
				return err
			}
			out, err := podclient.Kubeconfig(cmd.Context(), c, podclient.KubeconfigRequest{User: user, Groups: groups, Server: address, Validity: validity})
			if err != nil {
				return err
			}
			_, err = os.Stdout.Write(out)
			return err
		},
	}
	cmd.Flags().StringVar(&user, "user", "bootlet-admin", "user name (certificate CN)")
	cmd.Flags().StringSliceVar(&groups, "group", []string{"system:masters"}, "groups (certificate O): system:masters (admin) or bootlet:readers (read-only)")
	cmd.Flags().StringVar(&address, "server-address", "", "URL clients reach the listener at (default https://LISTEN-ADDRESS)")
	cmd.Flags().StringVar(&validity, "validity", "", "certificate lifetime (default and most: the daemon's --kubeconfig-max-validity, 24h unless set)")
	return cmd
}
