package reuseport

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// The SK_REUSEPORT program's verdicts.
const (
	skDrop = 0
	skPass = 1
)

// The map's three slots: the listener that gets every new connection, the
// listener under a probe, and the listener that gets loopback connections
// while it is not the target.
const (
	slotTarget   uint32 = 0
	slotProbe    uint32 = 1
	slotLoopback uint32 = 2
)

// ProbePortLow and ProbePortHigh bound the source ports of bootlet's probe
// connections, and ProbeAddr4 and ProbeAddr6 are their source addresses:
// the program gives a connection from one of those addresses and ports to
// the probe slot's listener, so bootlet can ask one chosen apiserver
// whether it serves while every other connection goes to the target.
//
// The ports are below 1024, so only a process with CAP_NET_BIND_SERVICE
// can bind them (while net.ipv4.ip_unprivileged_port_start keeps its
// default; checkProbePorts refuses to route otherwise): another local user
// can neither hold them to make every probe fail nor send a connection the
// program takes for a probe. 225-232 has no IANA service, and it lies below
// 512, out of the ranges that reserve a privileged source port for
// themselves (rresvport 512-1023, bindresvport and the kernel's NFS client
// from 600 and 665 up to 1023). The source address is loopback, which no
// packet from another host may carry, while a remote client may pick any
// source port it likes.
const (
	ProbePortLow  = 225
	ProbePortHigh = 232
)

// The probe connections' source addresses, by the family of the address
// they dial.
var (
	ProbeAddr4 = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	ProbeAddr6 = netip.IPv6Loopback()
)

// Group steers the SO_REUSEPORT group of one local TCP port. It is safe for
// concurrent use; its lock is a leaf held only across its own syscalls.
type Group struct {
	port int

	mu    sync.Mutex
	prog  *ebpf.Program
	slots *ebpf.Map // REUSEPORT_SOCKARRAY: slotTarget, slotProbe, slotLoopback
}

// program is, in C:
//
//	__u16 sport; __u32 key;
//	bool loopback = destination is 127.0.0.0/8 or ::1;
//	bool probeSrc = source is ProbeAddr4 or ProbeAddr6 (exactly);
//	if (probeSrc && !bpf_skb_load_bytes(ctx, 0, &sport, 2) && in probe range(ntohs(sport))) {
//		key = 1;
//		if (!bpf_sk_select_reuseport(ctx, &slots, &key, 0)) return SK_PASS;
//		key = loopback ? 2 : 0;
//		return bpf_sk_select_reuseport(ctx, &slots, &key, 0) ? SK_DROP : SK_PASS;
//	}
//	if (loopback) {
//		key = 2;
//		bpf_sk_select_reuseport(ctx, &slots, &key, 0);
//		return SK_PASS;
//	}
//	key = 0;
//	bpf_sk_select_reuseport(ctx, &slots, &key, 0);
//	return SK_PASS;
//
// Loopback connections are an apiserver's own loopback client (its
// post-start hooks and informers dial [::1]:port): they must reach that
// apiserver, whose self-signed loopback certificate no other one accepts.
// While a listener starts (it is not the target and never served) it sits
// in the loopback slot and gets them all: its post-start hooks must reach
// it, and one failure is fatal. Of several starting ones, the one in the
// slot keeps it until it serves (DecideRoute). With none starting, they go
// to the newest listener while it is not the target, and are otherwise
// left to the kernel's hash: a starting apiserver is done with its hooks
// once it serves, and the apiserver it takes over from still needs some of
// its own (its shutdown removes its endpoint through it), so each gets
// about half, and retries.
//
// A socket can sit in one slot of one REUSEPORT_SOCKARRAY only (the kernel
// keeps its slot in sk_user_data), so the target is probed with the probe
// slot empty from a non-loopback address, and the loopback slot's listener
// from a loopback one. A probe whose listener is gone is dropped (it times
// out: "not serving") rather than answered by another apiserver. Any other
// connection, when its slot is empty or its socket closed, goes where the
// kernel's hash sends it.
func program(slots *ebpf.Map) asm.Instructions {
	var p asm.Instructions
	add := func(ins ...asm.Instruction) { p = append(p, ins...) }
	// loadNet reads n bytes of the IP header at off into the stack at
	// fp-48; on failure it goes on at "sport" (not loopback, not a probe).
	loadNet := func(label string, off, n int32) {
		const hdrStartNet = 1 // BPF_HDR_START_NET
		add(asm.Mov.Reg(asm.R1, asm.R6).WithSymbol(label), asm.Mov.Imm(asm.R2, off),
			asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, -48), asm.Mov.Imm(asm.R4, n),
			asm.Mov.Imm(asm.R5, hdrStartNet), asm.FnSkbLoadBytesRelative.Call(), asm.JNE.Imm(asm.R0, 0, "sport"))
	}
	// selectSlot asks for the socket in slot; r0 is 0 when it was chosen.
	selectSlot := func(slot uint32, label string) {
		add(asm.StoreImm(asm.RFP, -4, int64(slot), asm.Word).WithSymbol(label), asm.Mov.Reg(asm.R1, asm.R6),
			asm.LoadMapPtr(asm.R2, slots.FD()), asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, -4),
			asm.Mov.Imm(asm.R4, 0), asm.FnSkSelectReuseport.Call())
	}
	probe4 := ProbeAddr4.As4()
	probe6 := ProbeAddr6.As16()
	// r6 = ctx; r9 = loopback, r7 = from the probe address (callee-saved:
	// helpers keep r6-r9).
	add(asm.Mov.Reg(asm.R6, asm.R1), asm.Mov.Imm(asm.R9, 0),
		asm.LoadMem(asm.R8, asm.R6, 20, asm.Word), // eth_protocol, big-endian
		asm.Mov.Imm(asm.R7, 0),
		asm.HostTo(asm.BE, asm.R8, asm.Half),
		asm.JEq.Imm(asm.R8, 0x0800, "ipv4"),
		asm.JEq.Imm(asm.R8, 0x86DD, "ipv6"),
		asm.Ja.Label("sport"))
	// ipv4: saddr (12) and daddr (16). The source is the probe address;
	// the first byte of the destination is 127.
	loadNet("ipv4", 12, 8)
	add(asm.LoadMem(asm.R8, asm.RFP, -48, asm.Word), asm.HostTo(asm.BE, asm.R8, asm.Word),
		asm.JNE.Imm(asm.R8, int32(uint32(probe4[0])<<24|uint32(probe4[1])<<16|uint32(probe4[2])<<8|uint32(probe4[3])), "ipv4-dst"),
		asm.Mov.Imm(asm.R7, 1),
		asm.LoadMem(asm.R8, asm.RFP, -44, asm.Byte).WithSymbol("ipv4-dst"), asm.JNE.Imm(asm.R8, 127, "sport"),
		asm.Mov.Imm(asm.R9, 1), asm.Ja.Label("sport"))
	// ipv6: saddr (8) and daddr (24), 16 bytes each. The source is the
	// probe address; the destination is ::1.
	loadNet("ipv6", 8, 32)
	hi, lo := be64(probe6[:8]), be64(probe6[8:])
	add(asm.LoadMem(asm.R8, asm.RFP, -48, asm.DWord), asm.HostTo(asm.BE, asm.R8, asm.DWord),
		asm.LoadImm(asm.R1, int64(hi), asm.DWord), asm.JNE.Reg(asm.R8, asm.R1, "ipv6-dst"),
		asm.LoadMem(asm.R8, asm.RFP, -40, asm.DWord), asm.HostTo(asm.BE, asm.R8, asm.DWord),
		asm.LoadImm(asm.R1, int64(lo), asm.DWord), asm.JNE.Reg(asm.R8, asm.R1, "ipv6-dst"),
		asm.Mov.Imm(asm.R7, 1),
		asm.LoadMem(asm.R8, asm.RFP, -32, asm.DWord).WithSymbol("ipv6-dst"), asm.JNE.Imm(asm.R8, 0, "sport"),
		asm.LoadMem(asm.R8, asm.RFP, -24, asm.DWord), asm.HostTo(asm.BE, asm.R8, asm.DWord),
		asm.JNE.Imm(asm.R8, 1, "sport"), asm.Mov.Imm(asm.R9, 1))
	// A probe: from the probe address, and sport (the first 2 bytes of the
	// TCP header) in the probe range.
	add(asm.JEq.Imm(asm.R7, 0, "connection").WithSymbol("sport"), asm.Mov.Reg(asm.R1, asm.R6), asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, -8), asm.Mov.Imm(asm.R4, 2),
		asm.FnSkbLoadBytes.Call(), asm.JNE.Imm(asm.R0, 0, "connection"),
		asm.LoadMem(asm.R5, asm.RFP, -8, asm.Half), asm.HostTo(asm.BE, asm.R5, asm.Half),
		asm.JLT.Imm(asm.R5, ProbePortLow, "connection"), asm.JGT.Imm(asm.R5, ProbePortHigh, "connection"))
	selectSlot(slotProbe, "probe")
	add(asm.JEq.Imm(asm.R0, 0, "pass"), asm.JEq.Imm(asm.R9, 0, "probe-target"))
	// The probe slot is empty and the probe dialled loopback: it is of the
	// loopback slot's listener.
	selectSlot(slotLoopback, "probe-loopback")
	add(asm.JEq.Imm(asm.R0, 0, "pass"), asm.Mov.Imm(asm.R0, skDrop), asm.Return())
	// The probe slot is empty: the probe is of the target itself.
	selectSlot(slotTarget, "probe-target")
	add(asm.JEq.Imm(asm.R0, 0, "pass"), asm.Mov.Imm(asm.R0, skDrop), asm.Return())
	// Any other connection: loopback ones to the loopback slot's listener
	// if there is one (else the hash), the rest to the target.
	add(asm.JEq.Imm(asm.R9, 0, "target").WithSymbol("connection"))
	selectSlot(slotLoopback, "loopback")
	add(asm.Ja.Label("pass"))
	selectSlot(slotTarget, "target")
	add(asm.Mov.Imm(asm.R0, skPass).WithSymbol("pass"), asm.Return())
	return p
}

// be64 is the big-endian number in b (8 bytes).
func be64(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// Open loads the steering program and its map for port. It fails on a
// kernel without BPF (or without the privilege for it); the caller then
// hands over without steering.
func Open(port int) (*Group, error) {
	slots, err := ebpf.NewMap(&ebpf.MapSpec{Name: "bootlet_steer", Type: ebpf.ReusePortSockArray, KeySize: 4, ValueSize: 8, MaxEntries: 3})
	if err != nil {
		return nil, fmt.Errorf("reuseport: create the REUSEPORT_SOCKARRAY map: %w", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "bootlet_steer", Type: ebpf.SkReuseport, License: "Apache-2.0", Instructions: program(slots)})
	if err != nil {
		slots.Close()
		return nil, fmt.Errorf("reuseport: load the SK_REUSEPORT program: %w", err)
	}
	return &Group{port: port, prog: prog, slots: slots}, nil
}

// Port is the port g steers.
func (g *Group) Port() int { return g.port }

// Close releases the program and the map. A group keeps the program
// attached until its last socket closes; with the map gone it selects
// nothing and the kernel's hash decides again.
func (g *Group) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return errors.Join(g.slots.Close(), g.prog.Close())
}

// checkBorrow makes sure this process may borrow a socket with
// pidfd_getfd(2), on one of its own descriptors: between threads of one
// process the kernel's ptrace check always passes, so a refusal here is
// a seccomp filter or an old kernel, and every listener would be refused
// the same way. Without it the router can neither probe a listener nor
// route to it.
func checkBorrow() error {
	pidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return borrowError("pidfd_open", err)
	}
	defer unix.Close(pidfd)
	fd, err := unix.PidfdGetfd(pidfd, pidfd, 0)
	if err != nil {
		return borrowError("pidfd_getfd", err)
	}
	return unix.Close(fd)
}

// borrowError says what a refused pidfd call means for the router.
func borrowError(call string, err error) error {
	switch {
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("reuseport: %s: %w: the kernel is older than 5.6; the apiserver port cannot be routed", call, err)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("reuseport: %s on this process's own descriptor: %w: a seccomp filter refuses it "+
			"(systemd-nspawn's default filter does, even with every capability: add --system-call-filter=pidfd_getfd; "+
			"a unit's SystemCallFilter= must allow it too); the apiserver port cannot be routed", call, err)
	}
	return fmt.Errorf("reuseport: %s: %w", call, err)
}

// put attaches the program to the group through the listener fd of pid and
// puts that listener in slot.
func (g *Group) put(slot uint32, l Listener) error {
	pidfd, err := unix.PidfdOpen(l.PID, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", l.PID, err)
	}
	defer unix.Close(pidfd)
	sock, err := unix.PidfdGetfd(pidfd, l.FD, 0)
	if err != nil {
		return fmt.Errorf("pidfd_getfd %d/%d: %w", l.PID, l.FD, err)
	}
	// Never keep another process's listener open: a socket nobody
	// accepts on would stay in the group.
	defer unix.Close(sock)
	if proto, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_PROTOCOL); err == nil && proto == unix.IPPROTO_MPTCP {
		return fmt.Errorf("pid %d listens on port %d with MPTCP, which the kernel cannot steer (Go listens with MPTCP by default since Go 1.24): run it with GODEBUG=multipathtcp=0", l.PID, g.port)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// Attaching again replaces the group's program: idempotent, and it
	// covers a group made anew since the last steering.
	if err := unix.SetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_EBPF, g.prog.FD()); err != nil {
		return fmt.Errorf("attach the steering program to port %d: %w", g.port, err)
	}
	if err := g.slots.Put(slot, uint64(sock)); err != nil {
		return fmt.Errorf("put pid %d's listener of port %d in slot %d: %w", l.PID, g.port, slot, err)
	}
	return nil
}

// clear empties slot.
func (g *Group) clear(slot uint32) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.slots.Delete(slot); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("clear slot %d of port %d: %w", slot, g.port, err)
	}
	return nil
}
