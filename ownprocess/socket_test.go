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
		if got := CgroupOfContainer(tc.content, uid, tc.id); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
