// Command cluster is the multi-node harness of `make cluster`,
// `make cluster-down`, `make cluster-poweroff`, `make cluster-poweron` and
// `make cluster-reboot` (docs/cluster.md, "The harness"): a thin command
// over package nodes, which does the work. `up` returns with the nodes
// running (each a detached systemd-nspawn) and prints the kubeconfig.
//
//	cluster up --repo DIR --masters M --workers W [--bootlet-args FLAGS]
//	cluster down
//	cluster poweroff|poweron NODE
//	cluster reboot NODE|all
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/bootlet/bootlet/e2e/nodes"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Printf("%s %s\n", time.Now().UTC().Format("15:04:05.0"), fmt.Sprintf(format, args...))
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("want a command: up, down, poweroff NODE, poweron NODE, reboot NODE|all")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "up":
		fs := flag.NewFlagSet("up", flag.ExitOnError)
		repo := fs.String("repo", ".", "the repository (its _output and make install)")
		masters := fs.Int("masters", 1, "masters")
		workers := fs.Int("workers", 1, "workers")
		noBoot := fs.Bool("no-boot", false, "stop once the disks are prepared (boot nothing)")
		bootletArgs := fs.String("bootlet-args", "", "extra flags of every node's bootlet daemon (BOOTLET_ARGS in its /etc/default/bootlet)")
		_ = fs.Parse(args[1:])
		_, phases, err := nodes.Up(ctx, *repo, nodes.Spec{Masters: *masters, Workers: *workers, NoBoot: *noBoot, BootletArgs: *bootletArgs}, logf)
		fmt.Print(phases)
		if err != nil {
			return fmt.Errorf("%w\n(what was made stays for a look: make cluster-down removes it)", err)
		}
		if *noBoot {
			fmt.Printf("disks prepared in %s, nothing booted; make cluster-down removes them\n", nodes.StateDir)
			return nil
		}
		fmt.Printf("cluster up: %d master(s), %d worker(s) on %s (bridge %s); state in %s\nkubeconfig: %s\n",
			*masters, *workers, nodes.ClusterSubnet, nodes.ClusterBridge, nodes.StateDir, nodes.AdminConf)
		return nil
	case "down":
		return nodes.Down(logf)
	case "poweroff", "poweron", "reboot":
		if len(args) != 2 || args[1] == "" {
			return fmt.Errorf("%s NODE (master-N or worker-N%s)", args[0], map[bool]string{true: ", or all"}[args[0] == "reboot"])
		}
		var ms []nodes.Member
		if args[1] == "all" && args[0] == "reboot" {
			var err error
			if ms, err = nodes.Running(); err != nil {
				return err
			}
		} else {
			m, err := nodes.ParseMember(args[1])
			if err != nil {
				return err
			}
			ms = []nodes.Member{m}
		}
		if _, err := nodes.LoadState(); err != nil {
			return fmt.Errorf("no cluster (%v): make cluster first", err)
		}
		if args[0] != "poweron" {
			for _, m := range ms {
				t0 := time.Now()
				if err := nodes.PowerOff(m); err != nil {
					return fmt.Errorf("%s: %w", m.Name, err)
				}
				logf("%s powered off in %s", m.Name, time.Since(t0).Round(time.Millisecond))
			}
		}
		if args[0] != "poweroff" {
			for _, m := range ms {
				mc, err := nodes.PowerOn(m)
				if err != nil {
					return fmt.Errorf("%s: %w", m.Name, err)
				}
				logf("%s powered on: systemd is PID %d on the host; console %s", m.Name, mc.PID1, m.Node().Console)
			}
		}
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}
