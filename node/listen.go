package node

import (
	"context"
	"fmt"
	"net"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/podapi"
	"github.com/bootlet/bootlet/podapi/apitls"
	"github.com/bootlet/bootlet/podapi/authz"
	"github.com/bootlet/bootlet/runner"
)

// startTCP sets up the PKI and serves the API on --listen, if given.
func startTCP(ctx context.Context, srv *podapi.Server, o *TCPOptions, rootDir, nodeName string, serveErr chan<- error) error {
	srv.SetAuthz(authz.Config{AdminGroups: o.AdminGroups, ReaderGroups: o.ReaderGroups})
	if o.Listen == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(o.Listen)
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
		Dir: filepath.Join(rootDir, "pki"), CertFile: o.CertFile, KeyFile: o.KeyFile,
		ClientCAFile: o.ClientCAFile, ClientCAKeyFile: o.ClientCAKeyFile, NodeName: nodeName, Hosts: hosts,
	})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", o.Listen)
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
