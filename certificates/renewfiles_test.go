package certificates

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"

	"github.com/bootlet/bootlet/manifests"
)

func TestSelectRenewals(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cands := []string{manifests.APIServer, manifests.EtcdServer, manifests.AdminClient, "bootlet-serving"}
	notAfter := map[string]time.Time{
		manifests.APIServer:   now.Add(10 * 24 * time.Hour),
		manifests.EtcdServer:  now.Add(300 * 24 * time.Hour),
		manifests.AdminClient: now.Add(-time.Hour), // expired
		"bootlet-serving":     now.Add(29 * 24 * time.Hour),
	}
	for _, tc := range []struct {
		name    string
		args    []string
		within  time.Duration
		want    []string
		wantErr string
	}{
		{name: "all", args: []string{"all"}, want: cands},
		{name: "names in candidate order", args: []string{manifests.AdminClient, manifests.APIServer}, want: []string{manifests.APIServer, manifests.AdminClient}},
		{name: "within the threshold, expired included", within: 30 * 24 * time.Hour, want: []string{manifests.APIServer, manifests.AdminClient, "bootlet-serving"}},
		{name: "within a minute: only the expired one", within: time.Minute, want: []string{manifests.AdminClient}},
		{name: "no argument, no threshold", wantErr: "name the certificates"},
		{name: "a CA", args: []string{manifests.CA}, wantErr: "is a CA"},
		{name: "unknown", args: []string{"apiserver-x"}, wantErr: `unknown certificate "apiserver-x": valid names are all, apiserver,`},
		{name: "all with names", args: []string{"all", manifests.APIServer}, wantErr: "give it alone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SelectRenewals(tc.args, cands, notAfter, tc.within, now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestRenewableCerts(t *testing.T) {
	got := RenewableCerts()
	for _, ca := range manifests.CABases() {
		if slices.Contains(got, ca) {
			t.Errorf("CA %s is renewable", ca)
		}
	}
	if len(got)+len(manifests.CABases()) != len(manifests.CertBases()) {
		t.Errorf("renewable %v and CAs %v do not make CertBases %v", got, manifests.CABases(), manifests.CertBases())
	}
}

func TestRenewSecretData(t *testing.T) {
	data := map[string][]byte{"apiserver.crt": []byte("old"), "apiserver.key": []byte("k"), "sa.pub": []byte("p"), "extra": []byte("x")}
	for _, tc := range []struct {
		name        string
		files       map[string][]byte
		wantChanged []string
		want        map[string][]byte
	}{
		{name: "same files", files: map[string][]byte{"apiserver.crt": []byte("old"), "apiserver.key": []byte("k")}, want: data},
		{name: "a renewed certificate; a key without a file is kept",
			files:       map[string][]byte{"apiserver.crt": []byte("new"), "apiserver.key": []byte("k"), "sa.pub": []byte("p"), "admin.conf": []byte("a")},
			wantChanged: []string{"apiserver.crt"},
			want:        map[string][]byte{"apiserver.crt": []byte("new"), "apiserver.key": []byte("k"), "sa.pub": []byte("p"), "extra": []byte("x")}},
		{name: "two keys", files: map[string][]byte{"apiserver.crt": []byte("new"), "sa.pub": []byte("p2")},
			wantChanged: []string{"apiserver.crt", "sa.pub"},
			want:        map[string][]byte{"apiserver.crt": []byte("new"), "apiserver.key": []byte("k"), "sa.pub": []byte("p2"), "extra": []byte("x")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := RenewSecretData(data, tc.files)
			if !slices.Equal(changed, tc.wantChanged) {
				t.Errorf("changed %v, want %v", changed, tc.wantChanged)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d keys, want %d", len(got), len(tc.want))
			}
			for k, v := range tc.want {
				if !bytes.Equal(got[k], v) {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
	if string(data["apiserver.crt"]) != "old" {
		t.Error("RenewSecretData changed its input")
	}
}

// TestRenewPKI renews every leaf of a render and checks what kubeadm's
// renewal promises (same CA, subject, SANs, usages, lifetime; here also
// the same key), that every copy in the asset dir follows the files, that
// a re-render keeps the renewed certificates and that the rendered
// Secrets' files are marshalled as render writes them.
func TestRenewPKI(t *testing.T) {
	dir, src := t.TempDir(), rendered(t)
	copyTree(t, src, dir)
	before := readTree(t, dir)
	// Later than the render, so that every NotAfter moves; not so much
	// later that the re-render below, at the clock's now, finds the
	// renewed certificates not valid yet.
	now := time.Now().Add(2 * time.Second)
	names := RenewableCerts()
	res, err := RenewPKI(dir, names, now, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Certs) != len(names) {
		t.Fatalf("renewed %d certificates, want %d", len(res.Certs), len(names))
	}
	after := readTree(t, dir)
	for _, name := range names {
		old, renewed := parseCert(t, before[filepath.Join(manifests.PKIDir, name+".crt")]), parseCert(t, after[filepath.Join(manifests.PKIDir, name+".crt")])
		if old.SerialNumber.Cmp(renewed.SerialNumber) == 0 {
			t.Errorf("%s: same serial", name)
		}
		if !bytes.Equal(old.RawSubject, renewed.RawSubject) || !bytes.Equal(old.RawIssuer, renewed.RawIssuer) ||
			!slices.Equal(old.DNSNames, renewed.DNSNames) || !ipsEqual(old.IPAddresses, renewed.IPAddresses) ||
			!usagesEqual(old.ExtKeyUsage, renewed.ExtKeyUsage) || old.KeyUsage != renewed.KeyUsage ||
			!bytes.Equal(old.RawSubjectPublicKeyInfo, renewed.RawSubjectPublicKeyInfo) {
			t.Errorf("%s: renewed certificate says something else than the old one", name)
		}
		if old.NotAfter.Sub(old.NotBefore) != renewed.NotAfter.Sub(renewed.NotBefore) || !renewed.NotAfter.After(old.NotAfter) {
			t.Errorf("%s: lifetime %s -> %s, NotAfter %s -> %s", name, old.NotAfter.Sub(old.NotBefore), renewed.NotAfter.Sub(renewed.NotBefore), old.NotAfter, renewed.NotAfter)
		}
		if !bytes.Equal(before[filepath.Join(manifests.PKIDir, name+".key")], after[filepath.Join(manifests.PKIDir, name+".key")]) {
			t.Errorf("%s: the key changed", name)
		}
	}
	for _, ca := range manifests.CABases() {
		if !bytes.Equal(before[filepath.Join(manifests.PKIDir, ca+".crt")], after[filepath.Join(manifests.PKIDir, ca+".crt")]) {
			t.Errorf("CA %s changed", ca)
		}
	}
	// Every copy in the asset dir is the file's now.
	copies, _, problems, err := PKIFileCopies(dir)
	if err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
	kc, problems, err := KubeconfigCopies(dir)
	if err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
	copies = append(copies, kc...)
	rs, err := RenderedSecrets(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		cs, err := SecretCertCopies(r.Secret, SourceRenderedSecret, func(k string) string { return r.File + " " + k })
		if err != nil {
			t.Fatal(err)
		}
		copies = append(copies, cs...)
	}
	report := CheckCertExpiration(copies, nil, now, 0)
	if d := report.Differing(); len(d) > 0 {
		t.Errorf("copies differ from pki/ after the renewal: %+v", d)
	}
	if len(res.Kubeconfigs) != len(clientKubeconfigs(t, src)) || len(res.SecretFiles) != 3 {
		t.Errorf("rewrote kubeconfigs %v and Secret files %v", res.Kubeconfigs, res.SecretFiles)
	}
	// Only the certificates, kubeconfigs and Secret files changed.
	for rel, data := range after {
		changed := !bytes.Equal(before[rel], data)
		want := strings.HasSuffix(rel, ".crt") && rel != filepath.Join(manifests.PKIDir, manifests.CASigning+".crt") && !slices.ContainsFunc(manifests.CABases(), func(ca string) bool { return rel == filepath.Join(manifests.PKIDir, ca+".crt") }) ||
			strings.HasSuffix(rel, ".conf") && rel != manifests.BootstrapKubeletKubeconfig || slices.Contains(res.SecretFiles, rel)
		if changed != want {
			t.Errorf("%s changed: %v, want %v", rel, changed, want)
		}
	}
	// A re-render keeps them all and writes the same bytes: the renewed
	// certificates are what render would keep, and the Secret files are
	// marshalled as render writes them.
	if err := manifests.Render(testConfig(), dir); err != nil {
		t.Fatal(err)
	}
	// (The credential directories name the asset dir: the first render was
	// in src.)
	for rel, data := range readTree(t, dir) {
		if strings.HasPrefix(rel, manifests.SelfHostedDir+"/") {
			data = bytes.ReplaceAll(data, []byte(dir), []byte(src))
		}
		credential := strings.HasPrefix(rel, manifests.PKIDir+"/") || strings.HasSuffix(rel, ".conf") || strings.HasPrefix(rel, manifests.SelfHostedDir+"/")
		if credential && !bytes.Equal(after[rel], data) {
			t.Errorf("a re-render after the renewal rewrote %s", rel)
		}
	}
	// Running it again re-issues (a re-run after a crash finishes).
	res2, err := RenewPKI(dir, []string{manifests.APIServer}, now, t.Logf)
	if err != nil || len(res2.Certs) != 1 || len(res2.SecretFiles) != 1 || len(res2.Kubeconfigs) != 0 {
		t.Errorf("renewing apiserver again: %+v %v", res2, err)
	}
}

// TestSyncKubeconfig: a kubeconfig's client certificate follows the leaf
// with its key and subject, and only that one.
func TestSyncKubeconfig(t *testing.T) {
	dir := rendered(t)
	admin, err := os.ReadFile(filepath.Join(dir, manifests.AdminKubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	leaves, err := LeafPEMs(filepath.Join(dir, manifests.PKIDir))
	if err != nil {
		t.Fatal(err)
	}
	if out, changed, err := SyncKubeconfig(admin, leaves); err != nil || changed || !bytes.Equal(out, admin) {
		t.Fatalf("a kubeconfig that matches pki/ changed: %v %v", changed, err)
	}
	// Another certificate for admin's key and subject.
	dir2 := t.TempDir()
	copyTree(t, dir, dir2)
	if _, err := RenewPKI(dir2, []string{manifests.AdminClient}, time.Now(), t.Logf); err != nil {
		t.Fatal(err)
	}
	leaves2, err := LeafPEMs(filepath.Join(dir2, manifests.PKIDir))
	if err != nil {
		t.Fatal(err)
	}
	out, changed, err := SyncKubeconfig(admin, leaves2)
	if err != nil || !changed {
		t.Fatalf("admin.conf not updated: %v %v", changed, err)
	}
	cfg, err := clientcmd.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	newPEM, _ := os.ReadFile(filepath.Join(dir2, manifests.PKIDir, manifests.AdminClient+".crt"))
	for _, ai := range cfg.AuthInfos {
		if !bytes.Equal(ai.ClientCertificateData, newPEM) {
			t.Error("admin.conf's client certificate is not the renewed one")
		}
		if _, err := certutil.ParseCertsPEM(ai.ClientKeyData); err == nil {
			t.Error("the key data became a certificate")
		}
	}
	// The scheduler's kubeconfig is for another key: untouched.
	sched, _ := os.ReadFile(filepath.Join(dir, manifests.SchedulerKubeconfig))
	if _, changed, err := SyncKubeconfig(sched, leaves2); err != nil || changed {
		t.Errorf("scheduler.conf changed with admin's certificate: %v %v", changed, err)
	}
}
