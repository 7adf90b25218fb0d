package nodes

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// The one API address of a cluster (kubeadm's HA guide "keepalived
// and haproxy", without haproxy): a VRRP virtual address that one master
// holds at a time. Every apiserver listens on 0.0.0.0:6443 in its node's
// network namespace, so whichever master holds the address serves it.
var (
	// VIP is on the nodes' subnet, below the masters' .11 up.
	VIP = netip.MustParseAddr("172.30.90.10")
	// APIPort is the apiserver's port (render's default).
	APIPort = 6443
)

// ControlPlaneEndpoint is render's --control-plane-endpoint: what every
// kubeconfig, cluster-info and joined kubelet names.
func ControlPlaneEndpoint() string { return fmt.Sprintf("%s:%d", VIP, APIPort) }

// The VRRP settings every master's keepalived.conf shares.
const (
	// vrrpRouterID is the virtual router's ID on the bridge (1-255; one
	// router, any value).
	vrrpRouterID = 51
	// AdvertInt is the VRRPv3 advertisement interval in seconds (RFC 5798
	// allows centiseconds). A backup takes over after 3 intervals and a
	// skew without adverts: the master down interval, 3 x 0.3 + 0.3 x
	// (256-150)/256 = 1.02 s here. That interval is most of the window a
	// client of the VIP fails in when its holder dies, so it must sit well
	// below the 2 s budget: at 0.5 s (1.7 s) a loaded machine's late timers
	// pushed the window to 2.7 s. Too short flaps instead: at 0.15 s, with
	// the VRRP process niced like the node (19), timers ran up to 1.9 s
	// late under the bootstrap's load and every backup took the address
	// again and again; the VRRP process now runs at nice -10
	// (vrrp_priority). Measured: docs/cluster.md "The API address".
	AdvertInt = "0.3"
	// vrrpBasePriority is every node's priority while its apiserver does
	// not answer /readyz (a worker's always); vrrpCheckWeight is added
	// while it does. All nodes alike: a backup takes the address only from
	// a node of lower priority (RFC 5798 preempts on greater, not on
	// equal), so the address moves only when its holder's apiserver stops
	// answering or its node dies, never back to a master that returns.
	// Between equals (before any apiserver answers, or after the holder
	// died) the higher address wins.
	vrrpBasePriority = 100
	vrrpCheckWeight  = 50
)

// WithdrawnFile is the file bootlet's daemon writes while its node is
// being demoted (masters/agent), which keepalived's check reads.
const WithdrawnFile = "/run/bootlet/api-address-withdrawn"

// KeepalivedConfPath is where Debian's keepalived.service reads its
// configuration; the unit starts only where the file is not empty
// (ConditionFileNotEmpty), so a node without it runs no keepalived.
const KeepalivedConfPath = "etc/keepalived/keepalived.conf"

// KeepalivedConf is node self's keepalived.conf in group, every node of the
// cluster: VRRPv3 on eth0 with the VIP, unicast to the other nodes'
// addresses only (no multicast: no packet goes to an address the harness
// did not make), a vrrp_script that adds vrrpCheckWeight while the local
// apiserver answers /readyz (anonymous, allowed by render's authentication
// config), and adverts taken only from those nodes (check_unicast_src). A
// failing check lowers the priority and never puts the instance in FAULT:
// before any apiserver is up, some node still holds the address, so the
// first apiserver to come up is reachable at once.
//
// Workers are in the group too, with the masters' configuration: what a
// node serves follows its label (masters/agent), so a worker promoted by
// one takes part in holding the address from its apiserver's first
// /readyz, and a demoted one stops. A worker serves no apiserver, so its
// priority stays at the base, below any serving master's; it holds the
// address only while no apiserver answers anywhere, which costs no client
// anything (the address moves to the first master whose apiserver
// answers, as it does between masters).
//
// One node alone has no peer. keepalived then needs no VRRP at all, and
// with an empty unicast_peer it would fall back to multicast: it gets the
// address from the same file as a static address (static_ipaddress),
// which keepalived adds at start and removes at stop.
func KeepalivedConf(self Member, group []Member) (string, error) {
	if len(group) == 1 && self.Role != Master {
		return "", fmt.Errorf("%s is not a master: a node alone holds the API address only as a master", self.Name)
	}
	var peers []string
	found := false
	for _, m := range group {
		if m.Name == self.Name {
			found = true
			continue
		}
		peers = append(peers, m.Addr().String())
	}
	if !found {
		return "", fmt.Errorf("%s is not in the API address's group", self.Name)
	}
	vip := netip.PrefixFrom(VIP, ClusterSubnet.Bits())
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by the cluster harness (e2e/nodes, docs/cluster.md "The API address").
global_defs {
    router_id %s
    # The check runs as root (curl needs nothing more); keepalived checks
    # that no one else may write the script's path.
    script_user root
    enable_script_security
    # The VRRP process's nice value: the nodes run niced (19) on a loaded
    # machine, and adverts sent late make backups take the address.
    vrrp_priority -10
}
`, self.Name)
	if len(peers) == 0 {
		fmt.Fprintf(&b, `
# One node: no peer to fail over to, so no VRRP; the address is this node's.
static_ipaddress {
    %s dev eth0
}
`, vip)
		return b.String(), nil
	}
	fmt.Fprintf(&b, `
vrrp_script apiserver {
    # The node's own address, not a loopback one: bootlet's port router gives
    # loopback connections to an apiserver that is starting (its own
    # post-start hooks need them), so during a DaemonSet's rolling update
    # a loopback /readyz would fail for the new pod's whole start and move
    # the address. A connection to the node's address goes where clients'
    # do: to the newest apiserver that serves.
    script "/usr/bin/curl --silent --fail --insecure --max-time 4 --output /dev/null https://%s/readyz"
    interval 2
    # Well above curl's own --max-time: keepalived counts a script it has
    # to kill as failed at once, whatever fall says (seen at load 50: one
    # slow /readyz moved the address), while curl's timeout is one failure.
    timeout 10
    # Three failures in a row (6-18 s) before the address moves away from a
    # slow apiserver; two successes before it counts as serving.
    fall 3
    rise 2
    # Added while /readyz answers: a failing check lowers the priority, no
    # FAULT state.
    weight %d
}

vrrp_script bootlet_withdrawn {
    # bootlet's daemon writes the file while the masters' controller
    # demotes this node (docs/cluster.md, "Growing and shrinking the
    # masters"): the address leaves it before its apiserver does.
    script "/usr/bin/test ! -e %s"
    interval 1
    # Never killed: keepalived counts a script it has to kill as failed at
    # once, whatever fall says, and at load 34 even this one took over its
    # default 1 s (seen: the address moved between serving masters). Two
    # failures in a row, not one: a file that is there stays there.
    timeout 10
    fall 2
    rise 1
    # Subtracted while the file is there: below any serving master's,
    # and not below a node that serves no apiserver (a worker, a master
    # still starting), which would take the address from the only
    # apiserver that answers.
    weight -%d
}

vrrp_instance api {
    # Every node starts as a backup at the same priority: the address
    # moves only to a node of a greater one.
    state BACKUP
    interface eth0
    version 3
    virtual_router_id %d
    priority %d
    advert_int %s
    # Adverts go out from the node's own address (never the VIP it may
    # hold), which is what the other nodes list as a peer.
    unicast_src_ip %s
    # An advert whose source is not one of unicast_peer is dropped: any
    # other host or pod on the bridge could otherwise send one of a
    # greater priority and take the API address.
    check_unicast_src
    unicast_peer {
`, netip.AddrPortFrom(self.Addr(), uint16(APIPort)), vrrpCheckWeight, WithdrawnFile, vrrpCheckWeight, vrrpRouterID, vrrpBasePriority, AdvertInt, self.Addr())
	for _, p := range peers {
		fmt.Fprintf(&b, "        %s\n", p)
	}
	fmt.Fprintf(&b, `    }
    virtual_ipaddress {
        %s dev eth0
    }
    track_script {
        apiserver
        bootlet_withdrawn
    }
    # Gratuitous ARP at once on taking the address (the host's and the
    # nodes' neighbour entries move), and again 1 s later.
    garp_master_delay 1
    garp_master_repeat 3
}
`, vip)
	return b.String(), nil
}

// writeKeepalived writes node m's keepalived.conf into its root, for the
// group of every node of the cluster, and enables Debian's
// keepalived.service there.
func writeKeepalived(root string, m Member, group []Member) error {
	conf, err := KeepalivedConf(m, group)
	if err != nil {
		return err
	}
	p := filepath.Join(root, KeepalivedConfPath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
		return err
	}
	return Enable(root, "keepalived.service")
}
