package nodes

import (
	"errors"
	"os"
)

// MakeNetwork makes the node's network namespace and a veth pair: eth0 in
// it with Net.Addr and a default route to Net.Gateway, the host's end with
// forwarding off (whatever net.ipv4.ip_forward says): what the node sends
// to the host is delivered, nothing is routed on. The host's end gets
// Net.HostAddr or joins Net.Bridge.
func (n *Node) MakeNetwork() error {
	steps := [][]string{
		{"netns", "add", n.Netns},
		{"link", "add", n.HostLink, "type", "veth", "peer", "name", "eth0", "netns", n.Netns},
	}
	for _, s := range steps {
		if _, err := Run("ip", s...); err != nil {
			return err
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+n.HostLink+"/forwarding", []byte("0"), 0o644); err != nil {
		return err
	}
	steps = nil
	if n.Net.HostAddr.IsValid() {
		steps = append(steps, []string{"addr", "add", n.Net.HostAddr.String(), "dev", n.HostLink})
	}
	if n.Net.Bridge != "" {
		steps = append(steps, []string{"link", "set", n.HostLink, "master", n.Net.Bridge})
	}
	steps = append(steps,
		[]string{"link", "set", n.HostLink, "up"},
		[]string{"-n", n.Netns, "link", "set", "lo", "up"},
		[]string{"-n", n.Netns, "addr", "add", n.Net.Addr.String(), "dev", "eth0"},
		[]string{"-n", n.Netns, "link", "set", "eth0", "up"},
		[]string{"-n", n.Netns, "route", "add", "default", "via", n.Net.Gateway.String()})
	for _, s := range steps {
		if _, err := Run("ip", s...); err != nil {
			return err
		}
	}
	return nil
}

// RemoveNetwork deletes the veth pair and the namespace (with every
// interface, route and rule the node made in it).
func (n *Node) RemoveNetwork() error {
	var errs []error
	if _, err := os.Stat("/sys/class/net/" + n.HostLink); err == nil {
		if _, err := Run("ip", "link", "del", n.HostLink); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := os.Stat("/run/netns/" + n.Netns); err == nil {
		if _, err := Run("ip", "netns", "del", n.Netns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
