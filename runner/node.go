package runner

import (
	"bufio"
	"net"
	"os"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// NodeFacts are the node's facts that pods see: host IPs (status.hostIPs,
// the downward API) and what the node offers (resource limits default to
// allocatable, as the kubelet's do). The daemon reads them once at start.
type NodeFacts struct {
	HostIPs       []string
	MachineMemory int64
	Allocatable   v1.ResourceList
}

// DetectNodeFacts reads the node's facts from /proc and its interfaces.
func DetectNodeFacts() NodeFacts {
	memory := machineMemory()
	return NodeFacts{
		HostIPs:       NodeIPs(),
		MachineMemory: memory,
		Allocatable: v1.ResourceList{
			v1.ResourceCPU:    *resource.NewQuantity(int64(numCPU()), resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(allocatableMemory(memory), resource.BinarySI),
		},
	}
}

// kubeletEvictionHardMemory is the kubelet's default hard eviction
// threshold for memory.available (DefaultEvictionHard, v1beta1): the
// kubelet subtracts it from capacity for the node's allocatable, and the
// shipped kubelet configurations keep that default.
const kubeletEvictionHardMemory = 100 << 20

// allocatableMemory is the kubelet's allocatable memory of a node with
// this much: capacity less the hard eviction threshold (no reservations).
func allocatableMemory(capacity int64) int64 {
	if capacity <= kubeletEvictionHardMemory {
		return 0
	}
	return capacity - kubeletEvictionHardMemory
}

func machineMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func numCPU() int {
	n := 0
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "processor") {
			n++
		}
	}
	if n == 0 {
		n = 1
	}
	return n
}

// NodeIPs is the node's first global unicast address per family, as the
// kubelet picks when --node-ip is not given.
func NodeIPs() []string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var v4, v6 string
	for _, i := range ifaces {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 || strings.HasPrefix(i.Name, "veth") || strings.HasPrefix(i.Name, "bootlet") || strings.HasPrefix(i.Name, "cni") {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || !ipn.IP.IsGlobalUnicast() {
				continue
			}
			if ipn.IP.To4() != nil && v4 == "" {
				v4 = ipn.IP.String()
			} else if ipn.IP.To4() == nil && v6 == "" {
				v6 = ipn.IP.String()
			}
		}
	}
	var out []string
	for _, ip := range []string{v4, v6} {
		if ip != "" {
			out = append(out, ip)
		}
	}
	if len(out) == 0 {
		out = []string{"127.0.0.1"}
	}
	return out
}
