package certificates

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	certutil "k8s.io/client-go/util/cert"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/checkpointer"
	"github.com/bootlet/bootlet/credmirror"
	"github.com/bootlet/bootlet/internal/kubeclient"
	"github.com/bootlet/bootlet/manifests"
)

// CheckOptions are check-expiration's inputs, its flags.
type CheckOptions struct {
	// AssetDir is render's output ("": skip its files, kubeconfigs and
	// rendered Secrets); RootDir the daemon's.
	AssetDir, RootDir string
	// Kubeconfig reads the self-hosted Secrets from the apiserver ("":
	// from the rendered files).
	Kubeconfig string
	// ServingCert is the daemon's serving certificate when not
	// RootDir/pki/apiserver.crt.
	ServingCert string
	// Output is table or json.
	Output string
	// WarnWithin fails the check for what expires within it.
	WarnWithin time.Duration
}

// CheckExpiration is `certs check-expiration`: every copy of every
// certificate, the report to out, notes and warnings to errOut, and an
// error naming what expires within o.WarnWithin or could not be read.
func CheckExpiration(ctx context.Context, o CheckOptions, out, errOut io.Writer, now time.Time) error {
	if o.Output != "table" && o.Output != "json" {
		return fmt.Errorf("--output must be table or json, not %q", o.Output)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	var copies []CertCopy
	var managedCAs []*x509.Certificate
	var problems, notes []string

	if o.AssetDir != "" {
		cs, managed, p, err := PKIFileCopies(o.AssetDir)
		if err != nil {
			return err
		}
		copies, managedCAs, problems = append(copies, cs...), append(managedCAs, managed...), append(problems, p...)
		cs, p, err = KubeconfigCopies(o.AssetDir)
		if err != nil {
			return err
		}
		copies, problems = append(copies, cs...), append(problems, p...)
	} else {
		notes = append(notes, "no --asset-dir: the PKI files, kubeconfigs and rendered Secrets are not checked")
	}

	rendered, secretNames, err := renderedSecrets(o.AssetDir)
	if err != nil {
		return err
	}
	cs, p, n := selfHostedSecretCopies(ctx, o.Kubeconfig, rendered, secretNames)
	copies, problems, notes = append(copies, cs...), append(problems, p...), append(notes, n...)

	cs, p, n = mirrorCopies(rendered)
	copies, problems, notes = append(copies, cs...), append(problems, p...), append(notes, n...)

	cs, p, n, err = checkpointCopies(o.RootDir, secretNames)
	if err != nil {
		return err
	}
	copies, problems, notes = append(copies, cs...), append(problems, p...), append(notes, n...)

	cs, managed, p, n := bootletCopies(o.RootDir, o.ServingCert)
	copies, managedCAs, problems, notes = append(copies, cs...), append(managedCAs, managed...), append(problems, p...), append(notes, n...)

	report := CheckCertExpiration(copies, managedCAs, now, o.WarnWithin)
	if o.Output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			CertReport
			Problems []string `json:"problems,omitempty"`
			Notes    []string `json:"notes,omitempty"`
		}{report, problems, notes}); err != nil {
			return err
		}
	} else {
		if err := printCertReport(out, report); err != nil {
			return err
		}
	}
	for _, n := range notes {
		fmt.Fprintln(errOut, "note:", n)
	}
	for _, row := range report.Differing() {
		fmt.Fprintf(errOut, "warning: %s at %s differs from %s\n", row.Name, row.Where, row.DiffersFrom)
	}
	return expirationError(report, problems)
}

// renderedSecrets are the Secrets of ASSETS/self-hosted (none without an
// asset dir), and the kube-system names to look for elsewhere: theirs, or
// render's when there are none to read.
func renderedSecrets(assetDir string) ([]RenderedSecret, []string, error) {
	if assetDir == "" {
		return nil, manifests.SelfHostedSecretNames, nil
	}
	rendered, err := RenderedSecrets(assetDir)
	if err != nil {
		return nil, nil, err
	}
	if len(rendered) == 0 {
		return nil, manifests.SelfHostedSecretNames, nil
	}
	var names []string
	for _, r := range rendered {
		names = append(names, r.Secret.Name)
	}
	return rendered, names, nil
}

// selfHostedSecretCopies reads the self-hosted Secrets from the apiserver
// when a kubeconfig is given, since those are what the pods mount; a Secret
// the apiserver does not have (before the pivot), or all of them when it
// cannot be reached, is read from its rendered file instead, and a note says
// so.
func selfHostedSecretCopies(ctx context.Context, kubeconfig string, rendered []RenderedSecret, names []string) (copies []CertCopy, problems, notes []string) {
	fromFile := map[string]bool{}
	for _, r := range rendered {
		fromFile[r.Secret.Name] = true
	}
	if kubeconfig != "" {
		live, err := apiSecrets(ctx, kubeconfig, names)
		if err != nil {
			if len(rendered) == 0 {
				notes = append(notes, fmt.Sprintf("the self-hosted Secrets were not checked: the apiserver of %s: %v, and no rendered self-hosted/*.yaml to read instead", kubeconfig, err))
			} else {
				notes = append(notes, fmt.Sprintf("the self-hosted Secrets are read from self-hosted/*.yaml: the apiserver of %s: %v", kubeconfig, err))
			}
		} else {
			for _, name := range names {
				s, ok := live[name]
				if !ok {
					notes = append(notes, fmt.Sprintf("the apiserver has no Secret %s/%s", metav1.NamespaceSystem, name))
					continue
				}
				fromFile[name] = false
				cs, err := SecretCertCopies(s, SourceAPISecret, func(key string) string {
					return fmt.Sprintf("secret %s/%s %s (apiserver)", s.Namespace, s.Name, key)
				})
				copies = append(copies, cs...)
				if err != nil {
					problems = append(problems, err.Error())
				}
			}
		}
	}
	for _, r := range rendered {
		if !fromFile[r.Secret.Name] {
			continue
		}
		cs, err := SecretCertCopies(r.Secret, SourceRenderedSecret, func(key string) string {
			return fmt.Sprintf("secret %s/%s %s (%s)", r.Secret.Namespace, r.Secret.Name, key, r.File)
		})
		copies = append(copies, cs...)
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	return copies, problems, notes
}

// apiSecrets gets kube-system's Secrets of names, by name: a get needs no
// right to list every Secret of kube-system. Not found is no error; any
// other failure is, for all of them, so that the caller falls back to the
// files rather than mixing sources.
func apiSecrets(ctx context.Context, kubeconfig string, names []string) (map[string]*v1.Secret, error) {
	_, c, err := kubeclient.ForFile(kubeconfig, userAgent, 10*time.Second)
	if err != nil {
		return nil, err
	}
	out := map[string]*v1.Secret{}
	for _, name := range names {
		s, err := c.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[name] = s
	}
	return out, nil
}

// mirrorCopies reads this master's mirrors of the rendered Secrets: the
// files the control plane's pods mount (package credmirror). A Secret with
// no mirror on this machine is a note: the command may run off the masters,
// or before the first pivot.
func mirrorCopies(rendered []RenderedSecret) (copies []CertCopy, problems, notes []string) {
	for _, r := range rendered {
		t, ok, err := credmirror.TargetOf(r.Secret)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: secret %s: %v", r.File, r.Secret.Name, err))
			continue
		}
		if !ok {
			continue
		}
		if !credmirror.Complete(t.Dir) {
			notes = append(notes, fmt.Sprintf("no copy of secret %s/%s at %s on this machine: not checked", r.Secret.Namespace, r.Secret.Name, t.Dir))
			continue
		}
		data, err := credmirror.Read(t)
		if err != nil {
			problems = append(problems, fmt.Sprintf("mirror %s: %v", t.Dir, err))
			continue
		}
		s := &v1.Secret{ObjectMeta: r.Secret.ObjectMeta, Data: data}
		paths := map[string]string{}
		for _, it := range t.Items {
			paths[it.Key] = it.Path
		}
		cs, err := SecretCertCopies(s, SourceMirror, func(key string) string {
			return fmt.Sprintf("mirror %s", filepath.Join(t.Dir, paths[key]))
		})
		copies = append(copies, cs...)
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	return copies, problems, notes
}

// checkpointCopies reads the daemon's checkpoint store: the Secrets the
// checkpointer stored with each self-hosted pod (podcheckpoints), and the
// Secrets of names in its own registry, either applied as they are or
// renamed for a checkpoint pod it runs (CheckpointObjectName).
func checkpointCopies(root string, names []string) (copies []CertCopy, problems, notes []string, err error) {
	recs, damaged, err := checkpoint.Inspect(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, []string{fmt.Sprintf("no checkpoint store under %s: no checkpointed copies checked", root)}, nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("checkpoint store: %w", err)
	}
	for _, d := range damaged {
		notes = append(notes, fmt.Sprintf("damaged checkpoint %s (%s) not checked", d.Path, d.Reason))
	}
	wanted := map[string]string{} // registry name -> the rendered Secret's
	for _, n := range names {
		wanted[n] = n
		for _, component := range manifests.SelfHostedSecretNames {
			wanted[checkpointer.CheckpointObjectName(component, n)] = n
		}
	}
	add := func(s *v1.Secret, record string) {
		cs, err := SecretCertCopies(s, SourceCheckpoint, func(key string) string {
			return fmt.Sprintf("checkpoint secret %s/%s %s%s", s.Namespace, s.Name, key, record)
		})
		copies = append(copies, cs...)
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	for _, r := range recs {
		switch r.Kind {
		case checkpoint.KindSecret:
			if _, ok := wanted[r.Name]; !ok || r.Namespace != metav1.NamespaceSystem {
				continue
			}
			var s v1.Secret
			if err := json.Unmarshal(r.Data, &s); err != nil {
				problems = append(problems, fmt.Sprintf("checkpoint secret %s/%s: %v", r.Namespace, r.Name, err))
				continue
			}
			add(&s, "")
		case checkpoint.KindPodCheckpoint:
			var c checkpointer.Checkpoint
			if err := json.Unmarshal(r.Data, &c); err != nil {
				problems = append(problems, fmt.Sprintf("checkpoint podcheckpoints %s/%s: %v", r.Namespace, r.Name, err))
				continue
			}
			for i := range c.Secrets {
				s := c.Secrets[i]
				// The stored Secret may lack its namespace: the pod's is
				// the one it was read from.
				s.Namespace = c.Namespace
				add(&s, " (podcheckpoint "+c.Key()+")")
			}
		}
	}
	return copies, problems, notes, nil
}

// bootletCopies are the daemon's own TCP serving certificate and, when
// bootlet made it, its CA (ROOT/pki/ca.crt). Missing files at the default
// path are a note (a daemon without --listen has none), at a given path a
// problem.
func bootletCopies(root, servingCert string) (copies []CertCopy, managedCAs []*x509.Certificate, problems, notes []string) {
	pkiDir := filepath.Join(root, "pki")
	files := []struct{ name, path string }{{"bootlet-serving", servingCert}, {"bootlet-ca", filepath.Join(pkiDir, "ca.crt")}}
	explicit := servingCert != ""
	if !explicit {
		files[0].path = filepath.Join(pkiDir, "apiserver.crt")
	}
	for i, f := range files {
		certs, err := certutil.CertsFromFile(f.path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && !(i == 0 && explicit) {
				notes = append(notes, fmt.Sprintf("no %s (the daemon makes it when it listens on TCP with its own PKI)", f.path))
			} else {
				problems = append(problems, fmt.Sprintf("%s: %v", f.path, err))
			}
			continue
		}
		where := "bootlet serving "
		if i == 1 {
			where = "bootlet ca "
		}
		copies = append(copies, CertCopy{Name: f.name, Source: SourceBootlet, Where: where + f.path, Cert: certs[0]})
		if i == 1 {
			if _, err := os.Stat(filepath.Join(pkiDir, "ca.key")); err == nil {
				managedCAs = append(managedCAs, certs[0])
			}
		}
	}
	return copies, managedCAs, problems, notes
}

// certTimeFormat is kubeadm's.
const certTimeFormat = "Jan 02, 2006 15:04 MST"

// printCertReport prints kubeadm's two tables with a WHERE column after the
// name, and a NOTE column for what needs attention.
func printCertReport(out io.Writer, r CertReport) error {
	yesNo := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	note := func(row CertRow) string {
		var n []string
		switch {
		case row.Expired:
			n = append(n, "EXPIRED")
		case row.ExpiresSoon:
			n = append(n, "expires within "+duration.HumanDuration(r.WarnWithin))
		}
		if row.DiffersFrom != "" {
			n = append(n, "differs from "+row.DiffersFrom)
		}
		return strings.Join(n, "; ")
	}
	// kubeadm's residual time; it prints <invalid> once expired.
	residual := func(row CertRow) string {
		return duration.HumanDuration(time.Duration(row.ResidualTimeSeconds) * time.Second)
	}
	tw := tabwriter.NewWriter(out, 10, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "CERTIFICATE\tWHERE\tEXPIRES\tRESIDUAL TIME\tCERTIFICATE AUTHORITY\tEXTERNALLY MANAGED\tNOTE")
	for _, row := range r.Certificates {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Name, row.Where, row.Expires.Format(certTimeFormat), residual(row), row.Authority, yesNo(row.ExternallyManaged), note(row))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "CERTIFICATE AUTHORITY\tWHERE\tEXPIRES\tRESIDUAL TIME\tEXTERNALLY MANAGED\tNOTE")
	for _, row := range r.CertificateAuthorities {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", row.Name, row.Where, row.Expires.Format(certTimeFormat), residual(row), yesNo(row.ExternallyManaged), note(row))
	}
	return tw.Flush()
}

// expirationError names each certificate that needs renewing once, with
// its earliest expiry and how many copies, so that a monitor's message stays
// short; and every copy that could not be read.
func expirationError(r CertReport, problems []string) error {
	type soon struct {
		expires time.Time
		copies  int
	}
	var order []string
	byName := map[string]*soon{}
	for _, row := range r.ExpiringSoon() {
		s, ok := byName[row.Name]
		if !ok {
			s = &soon{expires: row.Expires}
			byName[row.Name] = s
			order = append(order, row.Name)
		}
		s.copies++
		if row.Expires.Before(s.expires) {
			s.expires = row.Expires
		}
	}
	var msgs []string
	if len(order) > 0 {
		var items []string
		for _, name := range order {
			s := byName[name]
			state := "expires " + s.expires.Format(certTimeFormat)
			if !r.Now.Before(s.expires) {
				state = "EXPIRED " + s.expires.Format(certTimeFormat)
			}
			items = append(items, fmt.Sprintf("%s (%s, %d %s)", name, state, s.copies, plural(s.copies, "copy", "copies")))
		}
		msgs = append(msgs, fmt.Sprintf("%d %s expired or expiring within %s: %s", len(order),
			plural(len(order), "certificate", "certificates"), duration.HumanDuration(r.WarnWithin), strings.Join(items, ", ")))
	}
	if len(problems) > 0 {
		msgs = append(msgs, fmt.Sprintf("%d %s could not be checked: %s", len(problems), plural(len(problems), "certificate", "certificates"), strings.Join(problems, "; ")))
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; and "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
