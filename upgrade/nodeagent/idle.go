package nodeagent

import (
	"runtime"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// atIdlePriority runs f on an OS thread of its own under SCHED_IDLE, the
// kernel's lowest class, and waits for it. It is for the agent's bulk
// work on a node that serves: taking the kubelet out of its image
// decompresses a layer of tens of megabytes, about a second of CPU, in the
// kubelet's step, while the node's apiserver and etcd answer clients. At
// idle priority it takes only CPU that nothing else on the node wants.
//
// The thread stays locked and so ends with the goroutine (Go discards a
// thread locked at a goroutine's exit): no other goroutine ever runs under
// its policy. Where the policy cannot be set, f runs anyway, at the
// daemon's priority.
func atIdlePriority(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0); err != nil {
			klog.InfoS("Upgrade node agent: bulk work runs at the daemon's priority", "err", err)
		}
		done <- f()
	}()
	return <-done
}
