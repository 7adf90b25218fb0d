package ownprocess

import (
	"strings"
	"testing"
)

func TestCgroupOfPod(t *testing.T) {
	const uid = "0b7c3a1e-1111-2222-3333-444455556666"
	cases := []struct {
		name, content string
		want          bool
	}{
		{"cgroupfs v1", "12:memory:/kubepods/burstable/pod" + uid + "/abc\n11:cpu,cpuacct:/kubepods/burstable/pod" + uid + "/abc\n", true},
		{"cgroupfs v2", "0::/kubepods/burstable/pod" + uid + "/abc\n", true},
		{"systemd", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-abc.scope\n", true},
		{"guaranteed systemd", "0::/kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/x.scope\n", true},
		{"another pod", "0::/kubepods/burstable/pod0b7c3a1e-1111-2222-3333-444455556667/abc\n", false},
		{"prefix of a longer uid", "0::/kubepods/burstable/pod" + uid + "7/abc\n", false},
		{"host process", "0::/user.slice/session-1.scope\n12:memory:/\n", false},
	}
	for _, tc := range cases {
		if got := cgroupOfPod(tc.content, uid); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if cgroupOfPod("0::/kubepods/podx/abc", "") {
		t.Error("empty uid must match nothing")
	}
}

func TestCgroupOfContainer(t *testing.T) {
	const uid = "0b7c3a1e-1111-2222-3333-444455556666"
	const id = "4f1d9c2b7e6a5d4c3b2a19f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4"
	const sandbox = "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"
	cases := []struct {
		name, content, id string
		want              bool
	}{
		{"cgroupfs: the container", "12:memory:/kubepods/burstable/pod" + uid + "/" + id + "\n", id, true},
		{"systemd: the container's scope", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + id + ".scope\n", id, true},
		{"the pod's sandbox (pause), not the container", "0::/kubepods/burstable/pod" + uid + "/" + sandbox + "\n", id, false},
		{"the container ID under another pod", "0::/kubepods/burstable/pod0b7c3a1e-1111-2222-3333-444455556667/" + id + "\n", id, false},
		{"no container ID", "0::/kubepods/burstable/pod" + uid + "/" + id + "\n", "", false},
	}
	for _, tc := range cases {
		if got := cgroupOfContainer(tc.content, uid, tc.id); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAcceptedSocketInode(t *testing.T) {
	// 6443 = 0x192B, 51234 = 0xC822. The client's own side (local 51234,
	// remote 6443) and a queued, not yet accepted connection (inode 0)
	// must not match.
	tcp6 := `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:192B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1000 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000A00020F:192B 0000000000000000FFFF00000A00020F:C823 01 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
   2: 0000000000000000FFFF00000A00020F:192B 0000000000000000FFFF00000A00020F:C822 01 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 20 4 30 10 -1
`
	tcp4 := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0F02000A:C822 0F02000A:192B 01 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 20 4 30 10 -1
`
	if s, ok := acceptedSocket(tcp6, 6443, 51234); !ok || s.Inode != "4242" {
		t.Errorf("tcp6: %q %v, want 4242", s.Inode, ok)
	}
	if _, ok := acceptedSocket(tcp6, 6443, 51235); ok {
		t.Error("a queued connection (inode 0) must not count as accepted")
	}
	if _, ok := acceptedSocket(tcp4, 6443, 51234); ok {
		t.Error("the client side must not match")
	}
	if s, ok := acceptedSocket(tcp4, 51234, 6443); !ok || s.Inode != "777" {
		t.Errorf("reverse: %q %v", s.Inode, ok)
	}
}

func TestAcceptedSocketUID(t *testing.T) {
	tcp := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:2808 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 100 1 0000000000000000 100 0 0 10 0
   1: 0100007F:2808 0100007F:C822 01 00000000:00000000 00:00000000 00000000  1000        0 200 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:C822 0100007F:2808 01 00000000:00000000 00:00000000 00000000     0        0 201 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:2808 0100007F:C823 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
`
	if s, ok := acceptedSocket(tcp, 10248, 51234); !ok || s.UID != 1000 || s.Inode != "200" {
		t.Errorf("server side of 51234 → 10248: %+v %v", s, ok)
	}
	if _, ok := acceptedSocket(tcp, 10248, 51235); ok {
		t.Error("a TIME_WAIT socket (uid 0, inode 0) counts as the server side")
	}
}
