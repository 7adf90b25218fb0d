//go:build e2e

package e2e

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/bootlet/bootlet/manifests"
)

// certsRow is the part of `bootlet certs check-expiration -o json`'s rows
// the test reads.
type certsRow struct {
	Name        string    `json:"name"`
	Where       string    `json:"where"`
	Expires     time.Time `json:"expires"`
	ExpiresSoon bool      `json:"expiresSoon"`
	DiffersFrom string    `json:"differsFrom"`
}

type certsReport struct {
	Certificates           []certsRow `json:"certificates"`
	CertificateAuthorities []certsRow `json:"certificateAuthorities"`
}

// certsCheck runs `bootlet certs check-expiration` and returns its stdout
// and stderr apart: the JSON must parse on its own.
func certsCheck(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(Bin(t, "bootlet"), append([]string{"certs", "check-expiration"}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// TestCertsCheckExpiration renders a control plane and checkpoints its
// apiserver Secret in a daemon, without running either (no kubelet, no
// ports), then checks that check-expiration finds every rendered
// certificate with its file's expiry in each of its copies, fails naming
// them past --warn-within, and flags the checkpoint's copy once a re-render
// has re-issued the certificates.
func TestCertsCheckExpiration(t *testing.T) {
	RequireRoot(t)
	c := StartContainerd(t)
	// --listen makes the daemon mint its own CA and serving certificate.
	b := StartBootlet(t, c, "--listen", "127.0.0.1:0")
	assets := RenderControlPlane(t, filepath.Join(c.Dir, "assets"), filepath.Join(c.Dir, "etcd"), b.NodeName, AdvertiseAddress(t))

	// The Secret of self-hosted/kube-apiserver.yaml (its first object),
	// applied to the daemon: a checkpointed copy of the rendered PKI.
	data, err := os.ReadFile(filepath.Join(assets, "self-hosted", "kube-apiserver.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	secret, _, _ := strings.Cut(string(data), "\n---\n")
	if !strings.Contains(secret, "kind: Secret") {
		t.Fatalf("the first object of self-hosted/kube-apiserver.yaml is no Secret:\n%s", secret)
	}
	b.Apply(t, secret)

	args := []string{"--asset-dir", assets, "--root-dir", b.Dir}
	notAfter := pkiNotAfter(t, assets)

	out, stderr, err := certsCheck(t, append(args, "-o", "json", "--warn-within", "1h")...)
	if err != nil {
		t.Fatalf("check-expiration failed on a fresh render: %v\n%s%s", err, out, stderr)
	}
	var r certsReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("check-expiration -o json does not parse: %v\n%s", err, out)
	}
	rows := append(r.Certificates, r.CertificateAuthorities...)
	where := map[string]certsRow{}
	for _, row := range rows {
		where[row.Where] = row
		if want, ok := notAfter[row.Name]; ok && !row.Expires.Equal(want) {
			t.Errorf("%s (%s) expires %s, its file pki/%s.crt %s", row.Where, row.Name, row.Expires, row.Name, want)
		}
		if row.ExpiresSoon || row.DiffersFrom != "" {
			t.Errorf("fresh copy flagged: %+v", row)
		}
	}
	for name := range notAfter {
		if _, ok := where["file pki/"+name+".crt"]; !ok {
			t.Errorf("no row for file pki/%s.crt", name)
		}
	}
	for _, w := range []string{
		"kubeconfig admin.conf", "kubeconfig kubelet.conf", "kubeconfig bootlet-checkpointer.conf",
		"secret kube-system/kube-apiserver apiserver.crt (self-hosted/kube-apiserver.yaml)",
		"secret kube-system/kube-scheduler scheduler.conf (self-hosted/kube-scheduler.yaml)",
		"checkpoint secret kube-system/kube-apiserver apiserver.crt",
		"checkpoint secret kube-system/kube-apiserver etcd-ca.crt",
		"bootlet serving " + filepath.Join(b.Dir, "pki", "apiserver.crt"),
		"bootlet ca " + filepath.Join(b.Dir, "pki", "ca.crt"),
	} {
		if _, ok := where[w]; !ok {
			t.Errorf("no row where %q", w)
		}
	}
	if row := where["checkpoint secret kube-system/kube-apiserver apiserver.crt"]; row.Name != "apiserver" {
		t.Errorf("the checkpoint's apiserver.crt is named %q, not apiserver", row.Name)
	}

	// Beyond every certificate's validity (CAs: 10 years), all of them.
	out, stderr, err = certsCheck(t, append(args, "--warn-within", "100000h")...)
	if err == nil {
		t.Fatalf("check-expiration --warn-within 100000h succeeded:\n%s%s", out, stderr)
	}
	for name := range notAfter {
		if name == manifests.CASigning {
			name = manifests.CA // pki/ca-signing.crt is a copy of the cluster CA, listed as ca
		}
		if !strings.Contains(stderr, name+" (") {
			t.Errorf("the failure does not name %s:\n%s", name, stderr)
		}
	}

	// A re-render with another validity re-issues every leaf: the
	// checkpointed Secret now holds the old apiserver.crt.
	RenderControlPlane(t, assets, filepath.Join(c.Dir, "etcd"), b.NodeName, AdvertiseAddress(t), "--addons=", "--cert-validity", "4000h")
	out, stderr, err = certsCheck(t, args...)
	if err != nil {
		t.Fatalf("check-expiration after the re-render: %v\n%s%s", err, out, stderr)
	}
	var stale string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "checkpoint secret kube-system/kube-apiserver apiserver.crt") {
			stale = line
		}
	}
	if !strings.Contains(stale, "differs from file pki/apiserver.crt") {
		t.Errorf("the checkpoint's old apiserver.crt is not flagged:\n%s", out)
	}
	if !strings.Contains(stderr, "differs from file pki/apiserver.crt") {
		t.Errorf("no warning about the stale copy on stderr:\n%s", stderr)
	}
}

// pkiCerts is the first certificate of every file under ASSETS/pki, by its
// name there ("apiserver", "etcd/ca", "kubeconfig/admin").
func pkiCerts(t *testing.T, assets string) map[string]*x509.Certificate {
	t.Helper()
	out := map[string]*x509.Certificate{}
	dir := filepath.Join(assets, "pki")
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".crt") {
			return err
		}
		certs, err := certutil.CertsFromFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[strings.TrimSuffix(rel, ".crt")] = certs[0]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pkiNotAfter is NotAfter of every certificate under ASSETS/pki, by name.
func pkiNotAfter(t *testing.T, assets string) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	for name, c := range pkiCerts(t, assets) {
		out[name] = c.NotAfter
	}
	if len(out) < 16 {
		t.Fatalf("only %d certificates under %s", len(out), filepath.Join(assets, "pki"))
	}
	return out
}
