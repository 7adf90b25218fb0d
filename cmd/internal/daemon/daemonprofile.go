package daemon

import (
	"os"
	"runtime/pprof"

	"k8s.io/klog/v2"
)

// cpuProfileEnv names a file the daemon writes a CPU profile of its whole
// run to (pprof format, `go tool pprof bootlet FILE`). It is for the bench
// and for diagnosis (docs/configuration.md, "Every flag, in detail"); unset,
// the default, nothing is profiled. An environment variable rather than a
// flag: it is not configuration, and the tests' daemons inherit it from the
// bench without a new flag in every caller.
const cpuProfileEnv = "BOOTLET_CPU_PROFILE"

// startCPUProfile starts the CPU profile cpuProfileEnv asks for and returns
// the function that ends it (a no-op when unset or when it cannot start).
func startCPUProfile() func() {
	path := os.Getenv(cpuProfileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		klog.ErrorS(err, "CPU profile not started", "env", cpuProfileEnv)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		klog.ErrorS(err, "CPU profile not started", "env", cpuProfileEnv)
		_ = f.Close()
		return func() {}
	}
	klog.InfoS("Writing a CPU profile", "path", path, "env", cpuProfileEnv)
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			klog.ErrorS(err, "CPU profile not closed", "path", path)
		}
	}
}
