package daemon

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/podapi/apitls"
)

// The daemon's automatic renewal (--cert-renew-before). It only decides
// when: bootlet's own serving certificate is re-issued here
// (apitls.RenewServingCert, served by the next handshake), and the asset
// dir's certificates by `bootlet-tools certs renew`, the same code an
// operator runs, so the daemon links none of render's libraries.

const (
	// certCheckInterval is how often the daemon looks at the expiries
	// after its start.
	certCheckInterval = time.Hour
	// certRetryInterval is how soon a failed renewal is tried again (the
	// apiserver was down, say): its files are renewed already, the
	// cluster's copies not all.
	certRetryInterval = time.Minute
	// certRenewTimeout bounds one `certs renew`, rollouts included.
	certRenewTimeout = 10 * time.Minute
)

// certRenewer renews what expires within before.
type certRenewer struct {
	before               time.Duration
	nodeName, rootDir    string
	assetDir, kubeconfig string // both or neither
	pki                  *apitls.PKI
	event                func(node, eventType, reason, message string)
	// tools runs bootlet-tools with args and returns its output.
	tools func(ctx context.Context, args ...string) ([]byte, error)
	// pending: the last `certs renew` failed, so the files may be renewed
	// and the cluster's copies not: run it again even if nothing expires.
	pending bool
}

// run checks at once, then hourly, until ctx ends.
func (r *certRenewer) run(ctx context.Context) {
	for {
		next := certCheckInterval
		if !r.check(ctx, time.Now()) {
			next = certRetryInterval
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// check renews what expires within r.before, records one Event for it, and
// says whether everything succeeded.
func (r *certRenewer) check(ctx context.Context, now time.Time) bool {
	var renewed, failed []string
	if r.pki != nil && r.pki.OwnServing {
		if leaf, err := servingLeaf(r.pki); err != nil {
			klog.ErrorS(err, "Reading the serving certificate")
		} else if leaf.NotAfter.Before(now.Add(r.before)) {
			old, cert, err := apitls.RenewServingCert(filepath.Dir(r.pki.ServingCertFile))
			if err != nil {
				klog.ErrorS(err, "Renewing bootlet's serving certificate failed")
				failed = append(failed, "bootlet-serving: "+err.Error())
			} else {
				klog.InfoS("Renewed bootlet's serving certificate", "oldSerial", old.SerialNumber.String(), "serial", cert.SerialNumber.String(), "notAfter", cert.NotAfter.UTC().Format(time.RFC3339))
				renewed = append(renewed, fmt.Sprintf("bootlet-serving (expires %s)", cert.NotAfter.UTC().Format(time.RFC3339)))
			}
		}
	}
	if r.assetDir != "" {
		expiring, err := expiringLeaves(filepath.Join(r.assetDir, "pki"), now.Add(r.before))
		if err != nil {
			klog.ErrorS(err, "Reading the asset dir's certificates", "dir", r.assetDir)
			failed = append(failed, err.Error())
		} else if len(expiring) > 0 || r.pending {
			args := []string{"certs", "renew", "--expiring-within", r.before.String(), "--asset-dir", r.assetDir,
				"--kubeconfig", r.kubeconfig, "--root-dir", r.rootDir, "--timeout", certRenewTimeout.String()}
			if r.pki != nil && !r.pki.OwnServing {
				args = append(args, "--serving-cert", r.pki.ServingCertFile)
			}
			klog.InfoS("Renewing certificates that expire within the threshold", "certificates", expiring, "within", r.before)
			tctx, cancel := context.WithTimeout(ctx, certRenewTimeout+time.Minute)
			out, err := r.tools(tctx, args...)
			cancel()
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if line != "" {
					klog.InfoS("certs renew", "output", line)
				}
			}
			if err != nil {
				klog.ErrorS(err, "bootlet certs renew failed; retrying", "in", certRetryInterval)
				failed = append(failed, fmt.Sprintf("%s: %v", strings.Join(expiring, ", "), err))
				r.pending = true
			} else {
				renewed = append(renewed, expiring...)
				r.pending = false
			}
		}
	}
	if len(renewed) > 0 {
		msg := fmt.Sprintf("renewed %d certificates expiring within %s: %s", len(renewed), r.before, strings.Join(renewed, ", "))
		klog.InfoS("Certificates renewed", "certificates", renewed, "within", r.before)
		r.event(r.nodeName, v1.EventTypeNormal, "CertificatesRenewed", msg)
	}
	if len(failed) > 0 {
		r.event(r.nodeName, v1.EventTypeWarning, "CertificateRenewalFailed", "renewing certificates failed, retrying in "+certRetryInterval.String()+": "+strings.Join(failed, "; "))
		return false
	}
	return true
}

func servingLeaf(p *apitls.PKI) (*x509.Certificate, error) {
	c := p.ServingCertificate()
	if c == nil || len(c.Certificate) == 0 {
		return nil, fmt.Errorf("no serving certificate loaded")
	}
	return x509.ParseCertificate(c.Certificate[0])
}

// expiringLeaves are the names (path under pkiDir without .crt, as
// check-expiration prints them) of the leaf certificates under pkiDir that
// expire before deadline. CAs are left out: renewal does not rotate them.
func expiringLeaves(pkiDir string, deadline time.Time) ([]string, error) {
	var out []string
	err := filepath.WalkDir(pkiDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".crt") || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		certs, err := certutil.CertsFromFile(path)
		if err != nil {
			return err
		}
		if !certs[0].IsCA && certs[0].NotAfter.Before(deadline) {
			rel, _ := filepath.Rel(pkiDir, path)
			out = append(out, strings.TrimSuffix(filepath.ToSlash(rel), ".crt"))
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// execTools runs bootlet-tools (as toolsPath finds it) with args and
// returns its combined output.
func execTools(toolsPath func(verb string) (string, error)) func(ctx context.Context, args ...string) ([]byte, error) {
	return func(ctx context.Context, args ...string) ([]byte, error) {
		path, err := toolsPath("certs renew")
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Stdout, cmd.Stderr = &buf, &buf
		err = cmd.Run()
		return buf.Bytes(), err
	}
}
