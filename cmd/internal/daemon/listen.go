package daemon

import (
	"github.com/spf13/pflag"

	"github.com/bootlet/bootlet/node"
	"github.com/bootlet/bootlet/podapi/authz"
)

func addTCPFlags(f *pflag.FlagSet, o *node.TCPOptions) {
	f.StringVar(&o.Listen, "listen", "", "also serve the API on this TCP address (HOST:PORT) with mutual TLS; clients need a certificate from the client CA")
	f.StringVar(&o.CertFile, "tls-cert-file", "", "serving certificate for --listen (default: ROOT/pki/apiserver.crt, created and signed by ROOT/pki/ca.crt)")
	f.StringVar(&o.KeyFile, "tls-private-key-file", "", "key of --tls-cert-file")
	f.StringVar(&o.ClientCAFile, "client-ca-file", "", "CA bundle client certificates must chain to (default: ROOT/pki/ca.crt)")
	f.StringVar(&o.ClientCAKeyFile, "client-ca-key-file", "", "key of --client-ca-file, needed only for `bootlet kubeconfig` to mint certificates")
	f.StringSliceVar(&o.AdminGroups, "admin-group", []string{authz.DefaultAdminGroup}, "client certificate groups (O) that may do everything")
	f.StringSliceVar(&o.ReaderGroups, "reader-group", []string{authz.DefaultReaderGroup}, "client certificate groups (O) that may get, list and watch everything but Secrets, and read logs")
}
