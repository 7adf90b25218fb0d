package certificates

import (
	"crypto/x509"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	certutil "k8s.io/client-go/util/cert"

	"github.com/bootlet/bootlet/manifests"
)

// testConfig is a full, valid render Config that does not depend on the
// host.
func testConfig() manifests.Config {
	c := manifests.DefaultConfig()
	c.NodeName = "node1"
	c.AdvertiseAddress = "192.0.2.10"
	return c
}

var (
	renderOnce sync.Once
	renderDir  string
	renderErr  error
)

// rendered renders testConfig once per test binary (key generation is the
// slow part) and returns the directory. Tests must not modify it.
func rendered(t *testing.T) string {
	t.Helper()
	renderOnce.Do(func() {
		renderDir, renderErr = os.MkdirTemp("", "bootlet-render-")
		if renderErr == nil {
			renderErr = manifests.Render(testConfig(), renderDir)
		}
	})
	if renderErr != nil {
		t.Fatal(renderErr)
	}
	return renderDir
}

// clientKubeconfigs are the kubeconfigs of dir that embed a client
// certificate: every *.conf but a worker's bootstrap kubeconfig.
func clientKubeconfigs(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == manifests.BootstrapKubeletKubeconfig })
}

// readTree is every regular file under dir, by relative path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		out[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	for rel, data := range readTree(t, src) {
		fi, err := os.Stat(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, rel), data, fi.Mode()); err != nil {
			t.Fatal(err)
		}
	}
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func ipsEqual(a, b []net.IP) bool {
	return slices.EqualFunc(a, b, func(x, y net.IP) bool { return x.Equal(y) })
}

func usagesEqual(a, b []x509.ExtKeyUsage) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
