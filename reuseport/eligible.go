package reuseport

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/bootlet/bootlet/ownprocess"
)

// Apiserver is an apiserver container bootlet knows on this node: the
// router's caller lists them (from the container runtime), and only their
// processes' listeners may be probed, be the target or get the loopback
// connections.
type Apiserver struct {
	PodUID      types.UID
	ContainerID string // the CRI container ID, without the runtime's scheme
}

// DecideEligible says whether the router may route to a listener whose
// holder's /proc/PID/cgroup reads cgroup, given the apiserver containers
// bootlet knows: only when the holder is in the cgroup of one of them.
// Any process of uid 0 may join the port's SO_REUSEPORT group (the kernel
// asks only for the same uid), and the router would otherwise give it the
// new connections as soon as it answered the readiness path; only root can
// move a process into a container's cgroup, and only the runtime makes a
// container.
func DecideEligible(cgroup string, known []Apiserver) (bool, string) {
	for _, a := range known {
		if ownprocess.CgroupOfContainer(cgroup, a.PodUID, a.ContainerID) {
			return true, fmt.Sprintf("its process is in container %s of the apiserver pod %s", shortID(a.ContainerID), a.PodUID)
		}
	}
	return false, fmt.Sprintf("its process is in none of the %d apiserver containers bootlet knows on this node (cgroup %q)", len(known), strings.TrimSpace(cgroup))
}

func shortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}

// eligibility is the router's last DecideEligible answer for a listener.
type eligibility struct {
	pid int
	ok  bool
	why string
	at  time.Time
}

// ineligibleRecheck is how long a listener found in no known apiserver
// container stays out before it is looked at again: the runtime may list
// a container a moment after its process started, and asking it every
// round about a listener that stays foreign would cost a call each time.
const ineligibleRecheck = 2 * time.Second

// readCgroup is /proc/PID/cgroup ("" when unreadable: in no container).
func readCgroup(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	return string(data)
}
