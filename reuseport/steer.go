package reuseport

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// skPass is the SK_REUSEPORT program's verdict that lets the connection in:
// to the socket bpf_sk_select_reuseport chose, or, when it chose none (the
// map is empty, or its socket was closed), to the one the kernel's hash
// picks.
const skPass = 1

// Group steers the SO_REUSEPORT group of one local TCP port. It is safe for
// concurrent use; its lock is a leaf held only across its own syscalls.
type Group struct {
	port int

	mu     sync.Mutex
	prog   *ebpf.Program
	target *ebpf.Map // REUSEPORT_SOCKARRAY, one slot: the listener that gets every new connection
	gen    uint64    // counts Steer calls, so a late release leaves a newer steering alone
}

// Open loads the steering program and its map for port. It fails on a
// kernel without BPF (or without the privilege for it); the caller then
// hands over without steering.
func Open(port int) (*Group, error) {
	target, err := ebpf.NewMap(&ebpf.MapSpec{Name: "bootlet_steer", Type: ebpf.ReusePortSockArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return nil, fmt.Errorf("reuseport: create the REUSEPORT_SOCKARRAY map: %w", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:    "bootlet_steer",
		Type:    ebpf.SkReuseport,
		License: "Apache-2.0",
		// key := 0; bpf_sk_select_reuseport(ctx, target, &key, 0); return SK_PASS
		Instructions: asm.Instructions{
			asm.Mov.Reg(asm.R6, asm.R1),
			asm.StoreImm(asm.RFP, -4, 0, asm.Word),
			asm.LoadMapPtr(asm.R2, target.FD()),
			asm.Mov.Reg(asm.R3, asm.RFP),
			asm.Add.Imm(asm.R3, -4),
			asm.Mov.Imm(asm.R4, 0),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.FnSkSelectReuseport.Call(),
			asm.Mov.Imm(asm.R0, skPass),
			asm.Return(),
		},
	})
	if err != nil {
		target.Close()
		return nil, fmt.Errorf("reuseport: load the SK_REUSEPORT program: %w", err)
	}
	return &Group{port: port, prog: prog, target: target}, nil
}

// Port is the port g steers.
func (g *Group) Port() int { return g.port }

// Close releases the program and the map. A group keeps the program
// attached until its last socket closes; with the map gone it selects
// nothing and the kernel's hash decides again.
func (g *Group) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return errors.Join(g.target.Close(), g.prog.Close())
}

// steer attaches the program to the group through the listener fd of pid
// and makes that listener the map's socket. It returns the generation of
// this steering.
func (g *Group) steer(pid, fd int) (uint64, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return 0, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(pidfd)
	sock, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return 0, fmt.Errorf("pidfd_getfd %d/%d: %w", pid, fd, err)
	}
	// Never keep another process's listener open: a socket nobody
	// accepts on would stay in the group.
	defer unix.Close(sock)
	if proto, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_PROTOCOL); err == nil && proto == unix.IPPROTO_MPTCP {
		return 0, fmt.Errorf("pid %d listens on port %d with MPTCP, which the kernel cannot steer (Go listens with MPTCP by default since Go 1.24): run it with GODEBUG=multipathtcp=0", pid, g.port)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// Attaching again replaces the group's program: idempotent, and it
	// covers a group made anew since the last steering.
	if err := unix.SetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_EBPF, g.prog.FD()); err != nil {
		return 0, fmt.Errorf("attach the steering program to port %d: %w", g.port, err)
	}
	if err := g.target.Put(uint32(0), uint64(sock)); err != nil {
		return 0, fmt.Errorf("steer port %d to pid %d's listener: %w", g.port, pid, err)
	}
	g.gen++
	return g.gen, nil
}

// release empties the map if gen is still the current steering: the
// kernel's hash decides again.
func (g *Group) release(gen uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gen != g.gen {
		return nil
	}
	if err := g.target.Delete(uint32(0)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("release the steering of port %d: %w", g.port, err)
	}
	return nil
}

// Ports opens one Group per port on first use and keeps it for the
// daemon's life. It is safe for concurrent use.
type Ports struct {
	mu     sync.Mutex
	groups map[int]*Group
}

// Group returns the Group of port, opening it the first time. A port that
// cannot be steered (no BPF here) is tried again on the next call.
func (p *Ports) Group(port int) (*Group, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if g := p.groups[port]; g != nil {
		return g, nil
	}
	g, err := Open(port)
	if err != nil {
		return nil, err
	}
	if p.groups == nil {
		p.groups = map[int]*Group{}
	}
	p.groups[port] = g
	return g, nil
}
