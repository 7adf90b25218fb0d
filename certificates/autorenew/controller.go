package autorenew

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

// Event reasons on the daemon's Node.
const (
	ReasonRenewed = "CertificatesRenewed"
	ReasonFailed  = "CertificateRenewalFailed"
)

const (
	// checkInterval is how often the daemon looks at the expiries after
	// its start.
	checkInterval = time.Hour
	// retryInterval is how soon a failed renewal is tried again (the
	// apiserver was down, say): its files are renewed already, the
	// cluster's copies not all.
	retryInterval = time.Minute
	// renewTimeout bounds one `certs renew`, rollouts included.
	renewTimeout = 10 * time.Minute
)

// Config configures the controller.
type Config struct {
	// Before is the threshold: what expires within it is renewed.
	Before   time.Duration
	NodeName string
	// RootDir is the daemon's --root-dir, passed to certs renew.
	RootDir string
	// AssetDir and Kubeconfig (both or neither) are the control plane
	// whose leaves certs renew renews.
	AssetDir, Kubeconfig string
	// PKI is the daemon's TCP PKI (nil: no TCP listener).
	PKI *apitls.PKI
	// Event records an Event on the Node.
	Event func(node, eventType, reason, message string)
	// Tools runs bootlet-tools with args and returns its output
	// (ExecTools).
	Tools func(ctx context.Context, args ...string) ([]byte, error)
}

// Controller renews what expires within Config.Before.
type Controller struct {
	cfg Config
	// pending: the last `certs renew` failed, so it runs again even if
	// nothing expires.
	pending bool
}

// New is a controller of cfg.
func New(cfg Config) *Controller { return &Controller{cfg: cfg} }

// Run checks at once, then hourly (a minute after a failure), until ctx
// ends.
func (c *Controller) Run(ctx context.Context) {
	for {
		next := checkInterval
		if !c.Check(ctx, time.Now()) {
			next = retryInterval
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// Check is one round: it observes, decides, renews, records one Event for
// what it did, and says whether everything succeeded.
func (c *Controller) Check(ctx context.Context, now time.Time) bool {
	obs := c.observe(now)
	d := Decide(obs)
	renewed, failed := c.act(ctx, d, obs.Expiring)
	if len(renewed) > 0 {
		msg := fmt.Sprintf("renewed %d certificates expiring within %s: %s", len(renewed), c.cfg.Before, strings.Join(renewed, ", "))
		klog.InfoS("Certificates renewed", "certificates", renewed, "within", c.cfg.Before)
		c.cfg.Event(c.cfg.NodeName, v1.EventTypeNormal, ReasonRenewed, msg)
	}
	if len(failed) > 0 {
		c.cfg.Event(c.cfg.NodeName, v1.EventTypeWarning, ReasonFailed, "renewing certificates failed, retrying in "+retryInterval.String()+": "+strings.Join(failed, "; "))
		return false
	}
	return true
}

func (c *Controller) observe(now time.Time) Observation {
	o := Observation{Deadline: now.Add(c.cfg.Before), Pending: c.pending}
	if p := c.cfg.PKI; p != nil && p.OwnServing {
		o.OwnServing = true
		leaf, err := servingLeaf(p)
		if err != nil {
			klog.ErrorS(err, "Reading the serving certificate")
			o.ServingErr = err
		} else {
			o.ServingNotAfter = leaf.NotAfter
		}
	}
	if c.cfg.AssetDir != "" {
		o.AssetDir = true
		o.Expiring, o.ExpiringErr = ExpiringLeaves(filepath.Join(c.cfg.AssetDir, "pki"), o.Deadline)
		if o.ExpiringErr != nil {
			klog.ErrorS(o.ExpiringErr, "Reading the asset dir's certificates", "dir", c.cfg.AssetDir)
		}
	}
	return o
}

// act carries d out and returns what it renewed and what failed.
func (c *Controller) act(ctx context.Context, d Decision, expiring []string) (renewed, failed []string) {
	if d.RenewServing {
		old, cert, err := apitls.RenewServingCert(filepath.Dir(c.cfg.PKI.ServingCertFile))
		if err != nil {
			klog.ErrorS(err, "Renewing bootlet's serving certificate failed")
			failed = append(failed, "bootlet-serving: "+err.Error())
		} else {
			klog.InfoS("Renewed bootlet's serving certificate", "oldSerial", old.SerialNumber.String(), "serial", cert.SerialNumber.String(), "notAfter", cert.NotAfter.UTC().Format(time.RFC3339))
			renewed = append(renewed, fmt.Sprintf("bootlet-serving (expires %s)", cert.NotAfter.UTC().Format(time.RFC3339)))
		}
	}
	failed = append(failed, d.Problems...)
	if d.CertsRenew {
		args := []string{"certs", "renew", "--expiring-within", c.cfg.Before.String(), "--asset-dir", c.cfg.AssetDir,
			"--kubeconfig", c.cfg.Kubeconfig, "--root-dir", c.cfg.RootDir, "--timeout", renewTimeout.String()}
		if c.cfg.PKI != nil && !c.cfg.PKI.OwnServing {
			args = append(args, "--serving-cert", c.cfg.PKI.ServingCertFile)
		}
		klog.InfoS("Renewing certificates that expire within the threshold", "certificates", expiring, "within", c.cfg.Before)
		tctx, cancel := context.WithTimeout(ctx, renewTimeout+time.Minute)
		out, err := c.cfg.Tools(tctx, args...)
		cancel()
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if line != "" {
				klog.InfoS("certs renew", "output", line)
			}
		}
		if err != nil {
			klog.ErrorS(err, "bootlet certs renew failed; retrying", "in", retryInterval)
			failed = append(failed, fmt.Sprintf("%s: %v", strings.Join(expiring, ", "), err))
			c.pending = true
		} else {
			renewed = append(renewed, expiring...)
			c.pending = false
		}
	}
	return renewed, failed
}

func servingLeaf(p *apitls.PKI) (*x509.Certificate, error) {
	c := p.ServingCertificate()
	if c == nil || len(c.Certificate) == 0 {
		return nil, fmt.Errorf("no serving certificate loaded")
	}
	return x509.ParseCertificate(c.Certificate[0])
}

// ExpiringLeaves are the names (path under pkiDir without .crt, as
// check-expiration prints them) of the leaf certificates under pkiDir that
// expire before deadline. CAs are left out: renewal does not rotate them.
func ExpiringLeaves(pkiDir string, deadline time.Time) ([]string, error) {
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

// ExecTools runs bootlet-tools, as toolsPath finds it, with args and
// returns its combined output.
func ExecTools(toolsPath func(verb string) (string, error)) func(ctx context.Context, args ...string) ([]byte, error) {
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
