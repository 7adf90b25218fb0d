package podapi

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bootlet/bootlet/podapi/apitls"
)

// The TCP listener and the node-local kubeconfig endpoint. The
// certificates themselves (serving, client CA, minting) are package
// apitls's.

// ServeTLSListener serves the API on l with mutual TLS: every client must
// present a certificate that chains to the client CA. The node-local
// endpoints (/bootlet/v1/...) are not served here.
func (s *Server) ServeTLSListener(ctx context.Context, l net.Listener, p *apitls.PKI) error {
	cfg := p.ServerTLSConfig()
	srv := &http.Server{Handler: s, ReadHeaderTimeout: ReadHeaderTimeout, IdleTimeout: IdleTimeout, TLSConfig: cfg}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(tls.NewListener(l, cfg)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// KubeconfigRequest is what POST /bootlet/v1/kubeconfig takes (query
// parameters): user (CN, default bootlet-admin), group (O, repeatable,
// default system:masters), server (URL clients use), validity (Go duration,
// default and at most Server.MaxMintValidity, 24h unless
// --kubeconfig-max-validity says otherwise). Every minting is audited
// (mint.go).
func (s *Server) serveKubeconfig(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		writeError(w, methodNotAllowed(req))
		return
	}
	if s.PKI == nil || s.TCPAddress == "" {
		writeError(w, apierrors.NewServiceUnavailable("the daemon has no TCP listener (start it with --listen)"))
		return
	}
	q := req.URL.Query()
	user := q.Get("user")
	if user == "" {
		user = "bootlet-admin"
	}
	groups := q["group"]
	if len(groups) == 0 {
		groups = []string{"system:masters"}
	}
	validity, err := s.mintValidity(user, q.Get("validity"))
	if err != nil {
		writeError(w, err)
		return
	}
	server := q.Get("server")
	if server == "" {
		server = "https://" + s.TCPAddress
	}
	certPEM, keyPEM, err := s.PKI.MintClientCert(user, groups, validity)
	if err != nil {
		writeError(w, apierrors.NewServiceUnavailable(err.Error()))
		return
	}
	name := "bootlet"
	if s.Registry != nil && s.Registry.nodeName != "" {
		name = "bootlet-" + s.Registry.nodeName
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: s.PKI.ServingCAPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = name
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		writeError(w, err)
		return
	}
	s.auditMint(req, user, groups, validity, certPEM)
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(out)
}

// localHandler is what the unix socket serves: the API plus the
// node-local endpoints.
func (s *Server) localHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/bootlet/v1/kubeconfig", s.serveKubeconfig)
	mux.HandleFunc(EffectiveConfigPath, s.serveEffectiveConfig)
	mux.Handle("/", s)
	return mux
}
