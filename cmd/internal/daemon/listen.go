package daemon

import (
	"context"
	"fmt"
	"net"
	"path/filepath"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/podapi"
	"github.com/bootlet/bootlet/podapi/apitls"
	"github.com/bootlet/bootlet/podapi/authz"
	"github.com/bootlet/bootlet/runner"
)

// tcpOptions are the flags of the TCP (mutual TLS) listener.
type tcpOptions struct {
	listen          string
	certFile        string
	keyFile         string
	clientCAFile    string
	clientCAKeyFile string
	adminGroups     []string
	readerGroups    []string
}

func addTCPFlags(f *pflag.FlagSet, o *tcpOptions) {
	f.StringVar(&o.listen, "listen", "", "also serve the API on this TCP address (HOST:PORT) with mutual TLS; clients need a certificate from the client CA")
	f.StringVar(&o.certFile, "tls-cert-file", "", "serving certificate for --listen (default: ROOT/pki/apiserver.crt, created and signed by ROOT/pki/ca.crt)")
	f.StringVar(&o.keyFile, "tls-private-key-file", "", "key of --tls-cert-file")
	f.StringVar(&o.clientCAFile, "client-ca-file", "", "CA bundle client certificates must chain to (default: ROOT/pki/ca.crt)")
	f.StringVar(&o.clientCAKeyFile, "client-ca-key-file", "", "key of --client-ca-file, needed only for `bootlet kubeconfig` to mint certificates")
	f.StringSliceVar(&o.adminGroups, "admin-group", []string{authz.DefaultAdminGroup}, "client certificate groups (O) that may do everything")
	f.StringSliceVar(&o.readerGroups, "reader-group", []string{authz.DefaultReaderGroup}, "client certificate groups (O) that may get, list and watch everything but Secrets, and read logs")
}

// startTCP sets up the PKI and serves the API on --listen, if given.
func startTCP(ctx context.Context, srv *podapi.Server, o *tcpOptions, rootDir, nodeName string, serveErr chan<- error) error {
	srv.SetAuthz(authz.Config{AdminGroups: o.adminGroups, ReaderGroups: o.readerGroups})
	if o.listen == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(o.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	hosts := []string{}
	if host != "" && !net.ParseIP(host).IsUnspecified() {
		hosts = append(hosts, host)
	} else {
		hosts = append(hosts, runner.NodeIPs()...)
	}
	pki, err := apitls.LoadOrCreatePKI(apitls.PKIOptions{
		Dir: filepath.Join(rootDir, "pki"), CertFile: o.certFile, KeyFile: o.keyFile,
		ClientCAFile: o.clientCAFile, ClientCAKeyFile: o.clientCAKeyFile, NodeName: nodeName, Hosts: hosts,
	})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	advertise := host
	if advertise == "" || net.ParseIP(advertise).IsUnspecified() {
		advertise = hosts[0]
	}
	srv.PKI = pki
	srv.TCPAddress = net.JoinHostPort(advertise, port)
	if port == "0" {
		srv.TCPAddress = net.JoinHostPort(advertise, fmt.Sprint(l.Addr().(*net.TCPAddr).Port))
	}
	klog.InfoS("bootlet serving with mutual TLS", "address", l.Addr().String(), "advertise", srv.TCPAddress)
	// A renewed serving certificate (certs renew, the automatic renewal,
	// a replaced --tls-cert-file) is served without a restart.
	go pki.WatchServing(ctx, apitls.ServingReloadInterval)
	go func() { serveErr <- srv.ServeTLSListener(ctx, l, pki) }()
	return nil
}
