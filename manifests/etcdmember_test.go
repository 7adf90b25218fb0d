package manifests

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestEtcdMemberFromBootstrapPod(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   EtcdMember
	}{
		{"defaults", func(*Config) {}, EtcdMember{
			Name: "node1", PeerURLs: []string{"https://192.0.2.10:2380"}, InitialCluster: "node1=https://192.0.2.10:2380",
			DataDir: "/var/lib/etcd", ClientURL: "https://127.0.0.1:2379",
		}},
		{"other node, address and data dir", func(c *Config) {
			c.NodeName, c.AdvertiseAddress, c.EtcdDataDir = "master-0.example.org", "10.1.2.3", "/srv/etcd"
		}, EtcdMember{
			Name: "master-0.example.org", PeerURLs: []string{"https://10.1.2.3:2380"}, InitialCluster: "master-0.example.org=https://10.1.2.3:2380",
			DataDir: "/srv/etcd", ClientURL: "https://127.0.0.1:2379",
		}},
		{"IPv6", func(c *Config) {
			c.AdvertiseAddress, c.ServiceCIDR, c.PodCIDR = "2001:db8::10", "fd00:10:96::/112", "fd00:10:244::/56"
		}, EtcdMember{
			Name: "node1", PeerURLs: []string{"https://[2001:db8::10]:2380"}, InitialCluster: "node1=https://[2001:db8::10]:2380",
			DataDir: "/var/lib/etcd", ClientURL: "https://[::1]:2379",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.mutate(&c)
			if errs := c.Validate(); len(errs) > 0 {
				t.Fatalf("test config invalid: %v", errs)
			}
			pods, err := bootstrapPods(c, "/assets")
			if err != nil {
				t.Fatal(err)
			}
			got, err := EtcdMemberFromPod(pods[0], "/assets")
			if err != nil {
				t.Fatal(err)
			}
			tc.want.CAFile = "/assets/pki/etcd/ca.crt"
			tc.want.CertFile = "/assets/pki/etcd/healthcheck-client.crt"
			tc.want.KeyFile = "/assets/pki/etcd/healthcheck-client.key"
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestEtcdMemberFromPodRefusesOtherPods(t *testing.T) {
	pods, err := bootstrapPods(testConfig(), "/assets")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*v1.Pod)
		want   string
	}{
		{"not etcd", func(p *v1.Pod) { *p = *pods[1].DeepCopy() }, "no etcd container"},
		{"no name", func(p *v1.Pod) { p.Spec.Containers[0].Command = dropFlag(p.Spec.Containers[0].Command, "--name=") }, "no --name"},
		{"no peer URLs, no cluster", func(p *v1.Pod) {
			cmd := dropFlag(p.Spec.Containers[0].Command, "--initial-advertise-peer-urls=")
			p.Spec.Containers[0].Command = dropFlag(cmd, "--initial-cluster=")
		}, "no --initial-cluster, --initial-advertise-peer-urls"},
		{"data dir not from the host", func(p *v1.Pod) { p.Spec.Volumes = nil }, "no hostPath volume is mounted at the etcd container's --data-dir /var/lib/etcd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := pods[0].DeepCopy()
			tc.mutate(pod)
			_, err := EtcdMemberFromPod(pod, "/assets")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func dropFlag(cmd []string, prefix string) []string {
	var out []string
	for _, a := range cmd {
		if !strings.HasPrefix(a, prefix) {
			out = append(out, a)
		}
	}
	return out
}

// The file render writes reads back as the pod it was rendered from.
func TestLoadEtcdMember(t *testing.T) {
	dir := rendered(t)
	got, err := LoadEtcdMember(dir)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := bootstrapPods(testConfig(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := EtcdMemberFromPod(pods[0], dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadEtcdMember = %+v\nthe rendered pod says %+v", got, want)
	}
	for _, f := range []string{got.CAFile, got.CertFile, got.KeyFile} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("render wrote no %s: %v", f, err)
		}
	}

	_, err = LoadEtcdMember(filepath.Join(t.TempDir(), "nothing"))
	if err == nil || !strings.Contains(err.Error(), "is ") || !strings.Contains(err.Error(), "--asset-dir") {
		t.Errorf("missing asset dir: %v", err)
	}
}
