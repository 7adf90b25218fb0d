package manifests

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

func specByBase(t *testing.T, specs []certSpec, base string) certSpec {
	t.Helper()
	for _, s := range specs {
		if s.Base == base {
			return s
		}
	}
	t.Fatalf("no spec %s", base)
	return certSpec{}
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

func TestCertSpecsSANs(t *testing.T) {
	cases := []struct {
		name     string
		mutate   func(*Config)
		base     string
		wantDNS  []string
		wantIPs  []string
		wantCN   string
		wantOrgs []string
	}{
		{
			name: "apiserver, defaults", base: APIServer, mutate: func(*Config) {},
			wantDNS: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost", "node1"},
			wantIPs: []string{"10.96.0.1", "192.0.2.10", "127.0.0.1"},
			wantCN:  "kube-apiserver",
		},
		{
			name: "apiserver, other domain and service CIDR", base: APIServer,
			mutate:  func(c *Config) { c.ClusterDomain = "example.org"; c.ServiceCIDR = "172.20.0.0/16"; c.NodeName = "cp-a" },
			wantDNS: []string{"cp-a", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.example.org", "localhost"},
			wantIPs: []string{"172.20.0.1", "192.0.2.10", "127.0.0.1"},
			wantCN:  "kube-apiserver",
		},
		{
			name: "etcd server", base: EtcdServer, mutate: func(*Config) {},
			wantDNS: []string{"localhost", "node1"},
			wantIPs: []string{"192.0.2.10", "127.0.0.1", "::1"},
			wantCN:  "node1",
		},
		{
			name: "etcd peer", base: EtcdPeer, mutate: func(*Config) {},
			wantDNS: []string{"localhost", "node1"},
			wantIPs: []string{"192.0.2.10", "127.0.0.1", "::1"},
			wantCN:  "node1",
		},
		{name: "CA", base: CA, mutate: func(*Config) {}, wantDNS: []string{"kubernetes"}, wantCN: "kubernetes"},
		{name: "admin", base: AdminClient, mutate: func(*Config) {}, wantCN: "kubernetes-admin", wantOrgs: []string{"system:masters"}},
		{name: "kubelet", base: KubeletClient, mutate: func(c *Config) { c.NodeName = "cp-b" }, wantCN: "system:node:cp-b", wantOrgs: []string{"system:nodes"}},
		{name: "controller-manager", base: ControllerMgrClient, mutate: func(*Config) {}, wantCN: "system:kube-controller-manager"},
		{name: "scheduler", base: SchedulerClient, mutate: func(*Config) {}, wantCN: "system:kube-scheduler"},
		{name: "apiserver-etcd-client", base: APIServerEtcdClient, mutate: func(*Config) {}, wantCN: "kube-apiserver-etcd-client"},
		{name: "front-proxy-client", base: FrontProxyClient, mutate: func(*Config) {}, wantCN: "front-proxy-client"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.mutate(&c)
			specs, err := certSpecs(c)
			if err != nil {
				t.Fatal(err)
			}
			s := specByBase(t, specs, tc.base)
			if !slices.Equal(s.Config.AltNames.DNSNames, tc.wantDNS) {
				t.Errorf("DNS SANs %v, want %v", s.Config.AltNames.DNSNames, tc.wantDNS)
			}
			if got := ipStrings(s.Config.AltNames.IPs); !slices.Equal(got, tc.wantIPs) && !(len(got) == 0 && len(tc.wantIPs) == 0) {
				t.Errorf("IP SANs %v, want %v", got, tc.wantIPs)
			}
			if s.Config.CommonName != tc.wantCN || !slices.Equal(s.Config.Organization, tc.wantOrgs) {
				t.Errorf("subject CN=%s O=%v, want CN=%s O=%v", s.Config.CommonName, s.Config.Organization, tc.wantCN, tc.wantOrgs)
			}
		})
	}
}

func TestCertSpecsSignersAndLifetimes(t *testing.T) {
	c := testConfig()
	c.CertValidity, c.CAValidity = 48*time.Hour, 96*time.Hour
	specs, err := certSpecs(c)
	if err != nil {
		t.Fatal(err)
	}
	wantCA := map[string]string{
		CA: "", KubeletClientCA: "", FrontProxyCA: "", EtcdCA: "",
		APIServerKubeletClnt: KubeletClientCA,
		APIServer:            CA, AdminClient: CA, ControllerMgrClient: CA, SchedulerClient: CA, KubeletClient: CA, CheckpointerClient: CA,
		FrontProxyClient: FrontProxyCA,
		EtcdServer:       EtcdCA, EtcdPeer: EtcdCA, EtcdHealthcheckClient: EtcdCA, APIServerEtcdClient: EtcdCA,
	}
	if len(specs) != len(wantCA) {
		t.Fatalf("%d specs, want %d", len(specs), len(wantCA))
	}
	seen := map[string]bool{}
	for _, s := range specs {
		if want, ok := wantCA[s.Base]; !ok || s.CA != want {
			t.Errorf("%s signed by %q, want %q", s.Base, s.CA, want)
		}
		if s.CA != "" && !seen[s.CA] {
			t.Errorf("%s comes before its CA %s", s.Base, s.CA)
		}
		seen[s.Base] = true
		wantValidity := c.CertValidity
		if s.CA == "" {
			wantValidity = c.CAValidity
		}
		if s.Validity != wantValidity {
			t.Errorf("%s validity %s, want %s", s.Base, s.Validity, wantValidity)
		}
	}
}

// TestCertMismatch covers the keep-or-reissue decision.
func TestCertMismatch(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	c := testConfig()
	specs, err := certSpecs(c)
	if err != nil {
		t.Fatal(err)
	}
	caSpec, leafSpec := specByBase(t, specs, CA), specByBase(t, specs, APIServer)
	caKey := mustKey(t)
	ca, err := issue(caSpec, caKey, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	caPair := &keyPair{Cert: ca, Key: caKey}
	otherCAKey := mustKey(t)
	otherCA, err := issue(caSpec, otherCAKey, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	leafKey := mustKey(t)
	leaf, err := issue(leafSpec, leafKey, caPair, now)
	if err != nil {
		t.Fatal(err)
	}

	withSANs := leafSpec
	withSANs.Config.AltNames.DNSNames = append(slices.Clone(leafSpec.Config.AltNames.DNSNames), "extra")
	longer := leafSpec
	longer.Validity = 2 * leafSpec.Validity
	otherCN := leafSpec
	otherCN.Config.CommonName = "other"

	cases := []struct {
		name string
		cert *x509.Certificate
		key  *rsa.PrivateKey
		spec certSpec
		ca   *x509.Certificate
		now  time.Time
		want string // substring; "" means keep
	}{
		{"fresh CA", ca, caKey, caSpec, nil, now, ""},
		{"fresh leaf", leaf, leafKey, leafSpec, ca, now, ""},
		{"leaf a day later", leaf, leafKey, leafSpec, ca, now.Add(24 * time.Hour), ""},
		{"other key", leaf, mustKey(t), leafSpec, ca, now, "does not match its key"},
		{"other CA", leaf, leafKey, leafSpec, otherCA, now, "is not signed by"},
		{"leaf presented as CA", leaf, leafKey, leafSpec, nil, now, "not a self-signed CA"},
		{"SANs changed", leaf, leafKey, withSANs, ca, now, "has SANs"},
		{"subject changed", leaf, leafKey, otherCN, ca, now, "has subject"},
		{"lifetime changed", leaf, leafKey, longer, ca, now, "lifetime"},
		{"in its last tenth", leaf, leafKey, leafSpec, ca, leaf.NotAfter.Add(-leafSpec.Validity / 20), "expires soon"},
		{"expired", leaf, leafKey, leafSpec, ca, leaf.NotAfter.Add(time.Hour), "expires soon"},
		{"clock behind", leaf, leafKey, leafSpec, ca, now.Add(-time.Hour), "not valid yet"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := certMismatch(tc.cert, tc.key, tc.spec, tc.ca, tc.now)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestIssueLifetime checks kubeadm's backdate and the requested validity.
func TestIssueLifetime(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 123, time.UTC)
	for _, validity := range []time.Duration{time.Hour, 365 * 24 * time.Hour, 10 * 365 * 24 * time.Hour} {
		spec := certSpec{Base: "x", Validity: validity}
		spec.Config.CommonName = "x"
		cert, err := issue(spec, mustKey(t), nil, now)
		if err != nil {
			t.Fatal(err)
		}
		if want := now.Truncate(time.Second).Add(-5 * time.Minute); !cert.NotBefore.Equal(want) {
			t.Errorf("NotBefore %s, want %s", cert.NotBefore, want)
		}
		if got := cert.NotAfter.Sub(cert.NotBefore); got != validity+certBackdate {
			t.Errorf("lifetime %s, want %s", got, validity+certBackdate)
		}
	}
}

var testKeys []*rsa.PrivateKey

// mustKey hands out RSA keys from a small pool, so that the table tests do
// not spend seconds generating keys on a loaded machine.
func mustKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	if len(testKeys) == 0 {
		for range 4 {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				t.Fatal(err)
			}
			testKeys = append(testKeys, k)
		}
	}
	k := testKeys[0]
	testKeys = append(testKeys[1:], k)
	return k
}

// TestServiceAccountJWKSURI: the discovery document's jwks_uri names the
// API address, which the serving certificate every master shares names,
// whatever master answers (one labelled later too).
func TestServiceAccountJWKSURI(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"one master, no endpoint: its address", func(*Config) {}, "https://192.0.2.10:6443/openid/v1/jwks"},
		{"a VIP with its port", func(c *Config) { c.ControlPlaneEndpoint = "192.0.2.100:6443" }, "https://192.0.2.100:6443/openid/v1/jwks"},
		{"a name without a port", func(c *Config) { c.ControlPlaneEndpoint = "api.example.org" }, "https://api.example.org:6443/openid/v1/jwks"},
		{"an IPv6 master", func(c *Config) { c.AdvertiseAddress = "2001:db8::10" }, "https://[2001:db8::10]:6443/openid/v1/jwks"},
		{"masters behind a VIP", func(c *Config) {
			c.Masters = []Master{{"m1", "192.0.2.11"}, {"m2", "192.0.2.12"}, {"m3", "192.0.2.13"}}
			c.NodeName, c.AdvertiseAddress, c.ControlPlaneEndpoint = "m1", "192.0.2.11", "192.0.2.100:6443"
		}, "https://192.0.2.100:6443/openid/v1/jwks"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.mutate(&c)
			arg := serviceAccountJWKSURI(c)
			if arg.Name != "service-account-jwks-uri" || arg.Value != tc.want {
				t.Fatalf("--%s=%s, want --service-account-jwks-uri=%s", arg.Name, arg.Value, tc.want)
			}
			specs, err := certSpecs(c)
			if err != nil {
				t.Fatal(err)
			}
			host := strings.TrimPrefix(tc.want, "https://")
			host, _, _ = net.SplitHostPort(host[:strings.Index(host, "/")])
			alt := specByBase(t, specs, APIServer).Config.AltNames
			if !slices.Contains(alt.DNSNames, host) && !slices.ContainsFunc(alt.IPs, func(ip net.IP) bool { return ip.Equal(net.ParseIP(host)) }) {
				t.Errorf("the serving certificate does not name %s: %v %v", host, alt.DNSNames, ipStrings(alt.IPs))
			}
		})
	}
	c := testConfig()
	var found bool
	for _, a := range clusterConfiguration(c).APIServer.ExtraArgs {
		found = found || a.Name == "service-account-jwks-uri"
	}
	if !found {
		t.Error("the apiserver's flags lack --service-account-jwks-uri")
	}
}
