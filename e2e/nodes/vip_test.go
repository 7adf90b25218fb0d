package nodes

import (
	"strings"
	"testing"
)

// Every node of the cluster is in the group, workers too, with one
// configuration: what a node serves follows its label.
func TestKeepalivedConf(t *testing.T) {
	ms, err := Members(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, self := range ms {
		conf, err := KeepalivedConf(self, ms)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			"router_id " + self.Name,
			"version 3",
			"state BACKUP",
			"interface eth0",
			"priority 100",
			"advert_int " + AdvertInt,
			"vrrp_priority -10",
			"unicast_src_ip " + self.Addr().String(),
			"check_unicast_src",
			"172.30.90.10/24 dev eth0",
			"https://" + self.Addr().String() + ":6443/readyz",
			"weight 50",
			"enable_script_security",
		}
		for _, w := range want {
			if !strings.Contains(conf, w) {
				t.Errorf("%s's keepalived.conf lacks %q:\n%s", self.Name, w, conf)
			}
		}
		// The check dials the node's address: a loopback one goes to a
		// starting apiserver during a rolling update (bootlet's router).
		if strings.Contains(conf, "127.0.0.1") || strings.Contains(conf, "localhost") {
			t.Errorf("%s's keepalived.conf checks a loopback address:\n%s", self.Name, conf)
		}
		// Unicast to the three others, never to itself; nothing that would
		// make keepalived send multicast or enter FAULT on a failed check.
		peers := between(conf, "unicast_peer {", "}")
		for j, m := range ms {
			if has := strings.Contains(peers, m.Addr().String()); has != (i != j) {
				t.Errorf("%s's unicast_peer %q: has %s = %v", self.Name, peers, m.Name, has)
			}
		}
		// Adverts are taken from the peers only (check_unicast_src) and go
		// out from the address the other masters list as this one's: both
		// are keywords of the vrrp_instance.
		instance := between(conf, "vrrp_instance api {", "virtual_ipaddress {")
		for _, w := range []string{"\n    check_unicast_src\n", "\n    unicast_src_ip " + self.Addr().String() + "\n"} {
			if !strings.Contains(instance, w) {
				t.Errorf("%s's vrrp_instance lacks %q:\n%s", self.Name, strings.TrimSpace(w), instance)
			}
		}
		// The apiserver's check only adds: a failing one lowers the
		// priority, never below the base. Only bootlet's withdrawal
		// subtracts, below any serving master's and no lower than a node
		// that serves none (the base): a withdrawn holder that is the only
		// one serving keeps the address.
		if check := between(conf, "vrrp_script apiserver {", "}"); strings.Contains(check, "weight -") {
			t.Errorf("%s's apiserver check subtracts:\n%s", self.Name, check)
		}
		withdrawn := between(conf, "vrrp_script bootlet_withdrawn {", "}")
		for _, w := range []string{"/usr/bin/test ! -e " + WithdrawnFile, "weight -50", "timeout 10", "fall 2"} {
			if !strings.Contains(withdrawn, w) {
				t.Errorf("%s's withdrawal check lacks %q:\n%s", self.Name, w, withdrawn)
			}
		}
		if !strings.Contains(between(conf, "track_script {", "}"), "bootlet_withdrawn") {
			t.Errorf("%s's instance does not track the withdrawal", self.Name)
		}
		for _, bad := range []string{"mcast", "nopreempt", "dont_track", "static_ipaddress"} {
			if strings.Contains(conf, bad) {
				t.Errorf("%s's keepalived.conf has %q:\n%s", self.Name, bad, conf)
			}
		}
	}
}

// One node has no peer: the VIP is a static address, no VRRP instance
// (which with no unicast peer would advertise by multicast). One master
// with workers has peers: VRRP, so that a worker promoted later can hold
// the address once the master is gone.
func TestKeepalivedConfOneMaster(t *testing.T) {
	ms, _ := Members(1, 2)
	conf, err := KeepalivedConf(ms[0], ms[:1])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(conf, "static_ipaddress {\n    172.30.90.10/24 dev eth0") || strings.Contains(conf, "vrrp_instance") {
		t.Errorf("one node's keepalived.conf:\n%s", conf)
	}
	for _, self := range ms {
		conf, err := KeepalivedConf(self, ms)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(conf, "static_ipaddress") || !strings.Contains(conf, "vrrp_instance api {") {
			t.Errorf("%s's keepalived.conf among one master and two workers:\n%s", self.Name, conf)
		}
	}
}

func TestKeepalivedConfRefuses(t *testing.T) {
	ms, _ := Members(2, 1)
	if _, err := KeepalivedConf(ms[2], ms[2:]); err == nil {
		t.Error("a worker alone got the address as its own")
	}
	if _, err := KeepalivedConf(ms[1], ms[:1]); err == nil {
		t.Error("a node not in the group got a keepalived.conf")
	}
}

func TestRenderMastersArgs(t *testing.T) {
	ms, _ := Members(3, 0)
	got := strings.Join(RenderMastersArgs("/d", ControlPlaneEndpoint(), ms), " ")
	for _, w := range []string{"render --asset-dir /d ", "--master master-1=172.30.90.11 --master master-2=172.30.90.12 --master master-3=172.30.90.13 ",
		"--control-plane-endpoint 172.30.90.10:6443", "--kubelet-runtime-endpoint unix:///run/bootlet/containerd.sock"} {
		if !strings.Contains(got, w) {
			t.Errorf("RenderMastersArgs = %q, lacks %q", got, w)
		}
	}
}

func between(s, from, to string) string {
	_, after, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	in, _, _ := strings.Cut(after, to)
	return in
}
