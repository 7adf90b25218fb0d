package manifests

import (
	"net"
	"strings"
	"testing"
	"time"
)

// testConfig is a full, valid Config that does not depend on the host.
func testConfig() Config {
	c := DefaultConfig()
	c.NodeName = "node1"
	c.AdvertiseAddress = "192.0.2.10"
	return c
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*Config)
		wantErr string // substring; "" means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"dual-stack service CIDR", func(c *Config) { c.ServiceCIDR = "10.96.0.0/12,fd00:10:96::/112" }, ""},
		{"other etcd", func(c *Config) { c.EtcdServers = []string{"https://10.0.0.5:2379", "https://10.0.0.6:2379"} }, ""},
		{"no node name", func(c *Config) { c.NodeName = "" }, "--node-name: Required value"},
		{"upper-case node name", func(c *Config) { c.NodeName = "Node1" }, "--node-name: Invalid value"},
		{"node name too long for the pod name", func(c *Config) { c.NodeName = strings.Repeat("a", 240) }, "--node-name: Too long"},
		{"no advertise address", func(c *Config) { c.AdvertiseAddress = "" }, "--advertise-address: Required value"},
		{"advertise not an IP", func(c *Config) { c.AdvertiseAddress = "node1" }, "--advertise-address: Invalid value"},
		{"advertise loopback", func(c *Config) { c.AdvertiseAddress = "127.0.0.1" }, "loopback"},
		{"advertise unspecified", func(c *Config) { c.AdvertiseAddress = "0.0.0.0" }, "loopback or unspecified"},
		{"port 0", func(c *Config) { c.APIServerPort = 0 }, "--api-server-port"},
		{"port too big", func(c *Config) { c.APIServerPort = 70000 }, "--api-server-port"},
		{"bad service CIDR", func(c *Config) { c.ServiceCIDR = "10.96.0.0/33" }, "--service-cidr: Invalid value: \"10.96.0.0/33\": couldn't parse subnet"},
		{"service CIDR too large", func(c *Config) { c.ServiceCIDR = "10.0.0.0/8" }, "--service-cidr"},
		{"pod CIDR not a CIDR", func(c *Config) { c.PodCIDR = "10.244.0.0" }, "--pod-cidr: Invalid value"},
		{"pod CIDR smaller than a node's /24", func(c *Config) { c.PodCIDR = "10.244.0.0/25" }, "--pod-cidr"},
		{"overlapping CIDRs", func(c *Config) { c.PodCIDR = "10.96.0.0/16" }, "overlaps the service CIDR"},
		{"family mismatch", func(c *Config) { c.ServiceCIDR = "fd00:10:96::/112" }, "IP family"},
		{"bad domain", func(c *Config) { c.ClusterDomain = "Cluster_Local" }, "--cluster-domain"},
		{"no etcd", func(c *Config) { c.EtcdServers = nil }, "--etcd-servers: Required value"},
		{"plain http etcd", func(c *Config) { c.EtcdServers = []string{"http://127.0.0.1:2379"} }, "--etcd-servers"},
		{"version without v", func(c *Config) { c.KubernetesVersion = "1.36.3" }, "--kubernetes-version"},
		{"version not semver", func(c *Config) { c.KubernetesVersion = "vlatest" }, "--kubernetes-version"},
		{"relative data dir", func(c *Config) { c.EtcdDataDir = "var/lib/etcd" }, "--etcd-data-dir"},
		{"zero cert validity", func(c *Config) { c.CertValidity = 0 }, "--cert-validity"},
		{"negative CA validity", func(c *Config) { c.CAValidity = -time.Hour }, "--ca-validity"},
		{"cert outlives CA", func(c *Config) { c.CertValidity = 2 * c.CAValidity }, "cannot outlive its CA"},
		{"no add-ons", func(c *Config) { c.Addons = nil }, ""},
		{"unknown add-on", func(c *Config) { c.Addons = []string{"calico"} }, `--addons[0]: Unsupported value: "calico": supported values: "flannel", "kube-proxy", "coredns"`},
		{"add-on twice", func(c *Config) { c.Addons = []string{"coredns", "coredns"} }, `--addons[1]: Duplicate value: "coredns"`},
		{"relative CNI conf dir", func(c *Config) { c.CNIConfDir = "etc/cni/net.d" }, "--cni-conf-dir"},
		{"relative flannel run dir", func(c *Config) { c.FlannelRunDir = "run/flannel" }, "--flannel-run-dir"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.mutate(&c)
			errs := c.Validate()
			got := errs.ToAggregate()
			switch {
			case tc.wantErr == "" && got != nil:
				t.Fatalf("unexpected errors: %v", got)
			case tc.wantErr != "" && got == nil:
				t.Fatalf("no error, want %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(got.Error(), tc.wantErr):
				t.Fatalf("error %q does not contain %q", got, tc.wantErr)
			}
		})
	}
}

func TestAPIServerServiceIP(t *testing.T) {
	cases := []struct{ cidr, want string }{
		{"10.96.0.0/12", "10.96.0.1"},
		{"172.20.0.0/16", "172.20.0.1"},
		{"10.100.0.0/24", "10.100.0.1"},
		{"10.96.0.0/12,fd00:10:96::/112", "10.96.0.1"},
		{"fd00:10:96::/112", "fd00:10:96::1"},
	}
	for _, tc := range cases {
		c := testConfig()
		c.ServiceCIDR = tc.cidr
		got, err := c.APIServerServiceIP()
		if err != nil {
			t.Fatalf("%s: %v", tc.cidr, err)
		}
		if !got.Equal(net.ParseIP(tc.want)) {
			t.Errorf("%s: got %s, want %s", tc.cidr, got, tc.want)
		}
	}
}

func TestAPIServerURL(t *testing.T) {
	c := testConfig()
	if got := c.APIServerURL(); got != "https://192.0.2.10:6443" {
		t.Errorf("got %s", got)
	}
	c.AdvertiseAddress, c.APIServerPort = "2001:db8::10", 8443
	if got := c.APIServerURL(); got != "https://[2001:db8::10]:8443" {
		t.Errorf("got %s", got)
	}
}
