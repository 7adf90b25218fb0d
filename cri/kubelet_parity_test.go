package cri

// Parity of the helpers in kubelet.go with the kubelet functions they copy.
// This file links pkg/kubelet/cm and pkg/kubelet/kuberuntime on purpose:
// tests do not link into the daemon, so the copies stay proven identical
// without the daemon paying for those packages.

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubelet/kuberuntime"
)

func TestParityLogDirectories(t *testing.T) {
	for _, tc := range []struct {
		dir, ns, name, container string
		uid                      types.UID
	}{
		{"/var/log/pods", "kube-system", "etcd-node1", "etcd", "0b3e2f4e-1111-2222-3333-444455556666"},
		{"/var/log/pods/", "default", "web", "c", "u"},
		{"relative/dir", "ns", "a_b", "x", "u"},
		{"/tmp/../var//log", "ns", "n", "c", "uid"},
	} {
		if got, err := PodLogsDirectory(tc.dir, tc.ns, tc.name, tc.uid); err != nil || got != kuberuntime.BuildPodLogsDirectory(tc.dir, tc.ns, tc.name, tc.uid) {
			t.Errorf("PodLogsDirectory(%q, %q, %q, %q) = %q, %v; kubelet %q", tc.dir, tc.ns, tc.name, tc.uid, got, err, kuberuntime.BuildPodLogsDirectory(tc.dir, tc.ns, tc.name, tc.uid))
		}
		if got, err := ContainerLogsDirectory(tc.dir, tc.ns, tc.name, tc.uid, tc.container); err != nil || got != kuberuntime.BuildContainerLogsDirectory(tc.dir, tc.ns, tc.name, tc.uid, tc.container) {
			t.Errorf("ContainerLogsDirectory(%q, %q, %q, %q, %q) = %q, %v; kubelet %q", tc.dir, tc.ns, tc.name, tc.uid, tc.container, got, err, kuberuntime.BuildContainerLogsDirectory(tc.dir, tc.ns, tc.name, tc.uid, tc.container))
		}
	}
	// Where the kubelet would build a path that leaves its directory,
	// these refuse.
	for _, tc := range []struct {
		ns, name, container string
		uid                 types.UID
	}{
		{"", "", "", ""},
		{"ns", "n", "c", ""},
		{"ns", "n", "c", "."},
		{"ns", "n", "c", ".."},
		{"ns", "n", "c", "../../x"},
		{"ns", "n", "c", "a/b"},
		{"..", "n", "c", "u"},
		{"ns", "n/x", "c", "u"},
		{"ns", "n", "c", "u\x00"},
		{"ns", "n", "..", "u"},
		{"ns", "n", "a/b", "u"},
	} {
		if got, err := ContainerLogsDirectory("/var/log/pods", tc.ns, tc.name, tc.uid, tc.container); err == nil {
			t.Errorf("ContainerLogsDirectory(%q, %q, %q, %q) = %q, want an error", tc.ns, tc.name, tc.uid, tc.container, got)
		}
	}
}

func TestParityCgroupNames(t *testing.T) {
	for _, components := range [][]string{
		{},
		{""},
		{"kubepods"},
		{"kubepods", "burstable"},
		{"kubepods", "besteffort", "pod0b3e2f4e-1111-2222-3333-444455556666"},
		{"kubepods", "pod0b3e2f4e-1111-2222-3333-444455556666"},
		{"a-b", "c-d-e"},
	} {
		ours, err := newCgroupName(nil, components...)
		if err != nil {
			t.Fatal(err)
		}
		theirs := cm.NewCgroupName(cm.RootCgroupName, components...)
		if !reflect.DeepEqual([]string(ours), []string(theirs)) {
			t.Errorf("newCgroupName(%q) = %q, kubelet %q", components, ours, theirs)
		}
		if got, want := ours.toCgroupfs(), theirs.ToCgroupfs(); got != want {
			t.Errorf("toCgroupfs(%q) = %q, kubelet %q", components, got, want)
		}
		if got, err := ours.toSystemd(); err != nil || got != theirs.ToSystemd() {
			t.Errorf("toSystemd(%q) = %q, %v; kubelet %q", components, got, err, theirs.ToSystemd())
		}
	}
	// Both refuse the same components: the kubelet panics, bootlet
	// returns an error (a panic in a pod worker would kill the daemon).
	for _, bad := range []string{"a/b", "a_b"} {
		_, err := newCgroupName(nil, bad)
		if kubeletPanics := panics(func() { cm.NewCgroupName(cm.RootCgroupName, bad) }); err == nil || !kubeletPanics {
			t.Errorf("newCgroupName(%q) error %v, kubelet panics %v (want both)", bad, err, kubeletPanics)
		}
	}
	for _, uid := range []types.UID{"", "0b3e2f4e-1111-2222-3333-444455556666", "x"} {
		if got, want := podCgroupNameSuffix(uid), cm.GetPodCgroupNameSuffix(uid); got != want {
			t.Errorf("podCgroupNameSuffix(%q) = %q, kubelet %q", uid, got, want)
		}
	}
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}

func TestParityCFS(t *testing.T) {
	if quotaPeriod != cm.QuotaPeriod || cgroup2MaxSwapFilename != cm.Cgroup2MaxSwapFilename ||
		minShares != cm.MinShares || maxShares != cm.MaxShares || minQuotaPeriod != cm.MinQuotaPeriod {
		t.Fatalf("constants differ from pkg/kubelet/cm")
	}
	milli := []int64{-5, 0, 1, 2, 9, 10, 11, 100, 250, 999, 1000, 1001, 1500, 4000, 256000, 257000, 1 << 40}
	periods := []int64{0, 1000, 50000, 100000, 1000000}
	check := func(t *testing.T) {
		for _, m := range milli {
			if got, want := milliCPUToShares(m), cm.MilliCPUToShares(m); got != want {
				t.Errorf("milliCPUToShares(%d) = %d, kubelet %d", m, got, want)
			}
			for _, p := range periods {
				if got, want := milliCPUToQuota(m, p), cm.MilliCPUToQuota(m, p); got != want {
					t.Errorf("milliCPUToQuota(%d, %d) = %d, kubelet %d", m, p, got, want)
				}
			}
		}
	}
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("CPUCFSQuotaPeriod=%v", on), func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.CPUCFSQuotaPeriod, on)
			check(t)
		})
	}
}

func TestParityHugepageLimits(t *testing.T) {
	q := resource.MustParse
	containers := []v1.ResourceRequirements{
		{},
		{Limits: v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("1Gi")}},
		{Limits: v1.ResourceList{"hugepages-2Mi": q("4Mi"), v1.ResourceMemory: q("1Gi")}},
		{Limits: v1.ResourceList{"hugepages-1Gi": q("2Gi"), "hugepages-2Mi": q("0")}},
		{Limits: v1.ResourceList{"hugepages-64Ki": q("128Ki")}},
		{Limits: v1.ResourceList{"hugepages-bogus": q("1")}},
		{Limits: v1.ResourceList{"hugepages-3": q("6")}},
	}
	pods := []*v1.Pod{
		podWith(v1.ResourceRequirements{}, false),
		func() *v1.Pod {
			p := podWith(v1.ResourceRequirements{}, false)
			p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{"hugepages-2Mi": q("8Mi"), v1.ResourceCPU: q("2")}}
			return p
		}(),
		func() *v1.Pod {
			p := podWith(v1.ResourceRequirements{}, false)
			p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{"hugepages-1Gi": q("1Gi")}}
			return p
		}(),
	}
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("PodLevelResources=%v", on), func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.PodLevelResources, on)
			for i, pod := range pods {
				for j, res := range containers {
					got := hugepageLimits(context.Background(), pod, res)
					want := kuberuntime.GetHugepageLimitsFromResources(context.Background(), pod, res)
					if !reflect.DeepEqual(got, want) {
						t.Errorf("pod %d, container resources %d: hugepageLimits = %v, kubelet %v", i, j, got, want)
					}
				}
			}
		})
	}
}
