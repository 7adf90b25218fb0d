package cri

import (
	"reflect"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/utils/ptr"
)

func rl(cpu, mem string) v1.ResourceList {
	out := v1.ResourceList{}
	if cpu != "" {
		out[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		out[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return out
}

func podWith(res v1.ResourceRequirements, hostNetwork bool) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "kube-system", UID: "0b3e2f4e-1111-2222-3333-444455556666",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"}},
		Spec: v1.PodSpec{
			HostNetwork:                   hostNetwork,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			SecurityContext:               &v1.PodSecurityContext{},
			Containers: []v1.Container{{
				Name: "c", Image: "busybox", Resources: res,
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
				Ports: []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}},
			}},
		},
	}
}

func TestPodCgroupParent(t *testing.T) {
	tests := []struct {
		name   string
		res    v1.ResourceRequirements
		driver string
		want   string
	}{
		{"guaranteed cgroupfs", v1.ResourceRequirements{Requests: rl("1", "1Gi"), Limits: rl("1", "1Gi")}, CgroupDriverCgroupfs, "/kubepods/pod0b3e2f4e-1111-2222-3333-444455556666"},
		{"burstable cgroupfs", v1.ResourceRequirements{Requests: rl("100m", "")}, CgroupDriverCgroupfs, "/kubepods/burstable/pod0b3e2f4e-1111-2222-3333-444455556666"},
		{"besteffort cgroupfs", v1.ResourceRequirements{}, CgroupDriverCgroupfs, "/kubepods/besteffort/pod0b3e2f4e-1111-2222-3333-444455556666"},
		{"burstable systemd", v1.ResourceRequirements{Requests: rl("100m", "")}, CgroupDriverSystemd,
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b3e2f4e_1111_2222_3333_444455556666.slice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := PodCgroupParent(podWith(tc.res, true), tc.driver); err != nil || got != tc.want {
				t.Errorf("got %q, %v want %q", got, err, tc.want)
			}
		})
	}
}

// TestBadUIDsFailSandboxConfig: a UID the kubelet's cgroup naming panics on,
// or one that would climb out of the log directory, makes SandboxConfig
// return an error (it panicked in newCgroupName before, killing the daemon
// from a pod worker).
func TestBadUIDsFailSandboxConfig(t *testing.T) {
	for _, uid := range []types.UID{"a_b", "a/b", ".", "..", "../../x", "", "x\x00"} {
		for _, driver := range []string{CgroupDriverCgroupfs, CgroupDriverSystemd} {
			pod := podWith(v1.ResourceRequirements{}, true)
			pod.UID = uid
			var err error
			if panicked := panics(func() {
				_, err = SandboxConfig(pod, 0, SandboxOptions{PodLogsDir: "/var/log/pods", CgroupDriver: driver})
			}); panicked || err == nil {
				t.Errorf("UID %q, %s: SandboxConfig panicked %v, error %v; want an error", uid, driver, panicked, err)
			}
		}
	}
}

func TestSandboxConfig(t *testing.T) {
	for _, hostNetwork := range []bool{true, false} {
		pod := podWith(v1.ResourceRequirements{Requests: rl("250m", "64Mi"), Limits: rl("500m", "128Mi")}, hostNetwork)
		cfg, err := SandboxConfig(pod, 2, SandboxOptions{PodLogsDir: "/var/log/pods", CgroupDriver: CgroupDriverCgroupfs})
		if err != nil {
			t.Fatal(err)
		}
		if want := (&runtimeapi.PodSandboxMetadata{Name: "web-node1", Namespace: "kube-system", Uid: string(pod.UID), Attempt: 2}); !reflect.DeepEqual(cfg.Metadata, want) {
			t.Errorf("metadata %v", cfg.Metadata)
		}
		wantLabels := map[string]string{"app": "web", LabelPodName: "web-node1", LabelPodNamespace: "kube-system", LabelPodUID: string(pod.UID)}
		if !reflect.DeepEqual(cfg.Labels, wantLabels) {
			t.Errorf("labels %v", cfg.Labels)
		}
		if cfg.LogDirectory != "/var/log/pods/kube-system_web-node1_"+string(pod.UID) {
			t.Errorf("log dir %s", cfg.LogDirectory)
		}
		if hostNetwork != (cfg.Hostname == "") {
			t.Errorf("hostNetwork=%v hostname=%q: the kubelet sets a hostname only for pod-network pods", hostNetwork, cfg.Hostname)
		}
		if len(cfg.PortMappings) != 1 || cfg.PortMappings[0].HostPort != 8080 || cfg.PortMappings[0].ContainerPort != 80 {
			t.Errorf("ports %v", cfg.PortMappings)
		}
		sc := cfg.Linux.SecurityContext
		wantNet := runtimeapi.NamespaceMode_POD
		if hostNetwork {
			wantNet = runtimeapi.NamespaceMode_NODE
		}
		if sc.NamespaceOptions.Network != wantNet || sc.NamespaceOptions.Pid != runtimeapi.NamespaceMode_CONTAINER || sc.Seccomp.ProfileType != runtimeapi.SecurityProfile_RuntimeDefault {
			t.Errorf("security context %v", sc)
		}
		if r := cfg.Linux.Resources; r.CpuShares != 256 || r.CpuQuota != 50000 || r.CpuPeriod != 100000 || r.MemoryLimitInBytes != 128<<20 {
			t.Errorf("sandbox resources %v", r)
		}
	}
}

type fakeObjects struct {
	secrets    map[string]*v1.Secret
	configMaps map[string]*v1.ConfigMap
}

func (f fakeObjects) GetSecret(ns, name string) (*v1.Secret, error) {
	if s, ok := f.secrets[name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (f fakeObjects) GetConfigMap(ns, name string) (*v1.ConfigMap, error) {
	if c, ok := f.configMaps[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func TestContainerConfig(t *testing.T) {
	tests := []struct {
		name         string
		res          v1.ResourceRequirements
		wantShares   int64
		wantQuota    int64
		wantMem      int64
		wantOOMScore int64
	}{
		{"guaranteed", v1.ResourceRequirements{Requests: rl("1", "1Gi"), Limits: rl("1", "1Gi")}, 1024, 100000, 1 << 30, -997},
		{"burstable", v1.ResourceRequirements{Requests: rl("100m", "1Gi")}, 102, 0, 0, 1000 - (1000*(1<<30))/(8<<30)},
		{"besteffort", v1.ResourceRequirements{}, 2, 0, 0, 1000},
		{"limit only", v1.ResourceRequirements{Limits: rl("2", "")}, 2048, 200000, 0, 999},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := podWith(tc.res, true)
			c := &pod.Spec.Containers[0]
			if tc.name == "limit only" {
				// The apiserver would default requests from limits; a
				// static pod gets the same from legacyscheme defaulting.
				// Here the raw conversion must still derive shares from
				// the limit, as calculateLinuxResources does.
				pod.Spec.Containers[0].Resources.Requests = nil
			}
			cfg, err := ContainerConfig(pod, c, 3, ContainerOptions{PodLogsDir: "/var/log/pods", ImageRef: "sha256:abc", MachineMemory: 8 << 30,
				Envs: []kubecontainer.EnvVar{{Name: "A", Value: "1"}}})
			if err != nil {
				t.Fatal(err)
			}
			r := cfg.Linux.Resources
			if r.CpuShares != tc.wantShares || r.CpuQuota != tc.wantQuota || r.MemoryLimitInBytes != tc.wantMem || r.OomScoreAdj != tc.wantOOMScore {
				t.Errorf("resources shares=%d quota=%d mem=%d oom=%d", r.CpuShares, r.CpuQuota, r.MemoryLimitInBytes, r.OomScoreAdj)
			}
			if cfg.LogPath != "c/3.log" || cfg.Metadata.Attempt != 3 {
				t.Errorf("log path %s attempt %d", cfg.LogPath, cfg.Metadata.Attempt)
			}
			wantLabels := map[string]string{LabelPodName: "web-node1", LabelPodNamespace: "kube-system", LabelPodUID: string(pod.UID), LabelContainerName: "c"}
			if !reflect.DeepEqual(cfg.Labels, wantLabels) {
				t.Errorf("labels %v", cfg.Labels)
			}
			a := cfg.Annotations
			if a[AnnotationContainerHash] != strconv.FormatUint(kubecontainer.HashContainer(c), 16) || a[AnnotationRestartCount] != "3" ||
				a[AnnotationTerminationGracePeriod] != "30" || a[AnnotationContainerPorts] == "" || a[AnnotationTerminationMessagePath] != "/dev/termination-log" {
				t.Errorf("annotations %v", a)
			}
			if cfg.Image.Image != "sha256:abc" || cfg.Image.UserSpecifiedImage != "busybox" {
				t.Errorf("image %v", cfg.Image)
			}
			if cfg.Linux.SecurityContext.Seccomp.ProfileType != runtimeapi.SecurityProfile_Unconfined {
				t.Errorf("container seccomp must be Unconfined with seccompDefault off, got %v", cfg.Linux.SecurityContext.Seccomp)
			}
		})
	}
}

func TestMakeEnvironment(t *testing.T) {
	pod := podWith(v1.ResourceRequirements{Limits: rl("500m", "")}, false)
	c := &pod.Spec.Containers[0]
	c.EnvFrom = []v1.EnvFromSource{
		{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}, Prefix: "CM_"},
		{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "missing"}, Optional: ptr.To(true)}},
	}
	c.Env = []v1.EnvVar{
		{Name: "BASE", Value: "x"},
		{Name: "DERIVED", Value: "$(BASE)-$(CM_k)-$(UNDEFINED)"},
		{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
		{Name: "IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
		{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1m")}}},
		{Name: "TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "t"}}},
		{Name: "OPT", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "nope", Optional: ptr.To(true)}}},
	}
	objs := fakeObjects{
		secrets:    map[string]*v1.Secret{"s": {Data: map[string][]byte{"t": []byte("tok")}}},
		configMaps: map[string]*v1.ConfigMap{"cm": {Data: map[string]string{"k": "v"}}},
	}
	envs, err := MakeEnvironment(pod, c, EnvFacts{PodIPs: []string{"10.0.0.5"}}, objs)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range envs {
		got[e.Name] = e.Value
	}
	want := map[string]string{"CM_k": "v", "BASE": "x", "DERIVED": "x-v-$(UNDEFINED)", "POD": "web-node1", "IP": "10.0.0.5", "CPU": "500", "TOKEN": "tok"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("env\n got  %v\n want %v", got, want)
	}

	c.Env = append(c.Env, v1.EnvVar{Name: "BAD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "absent"}}})
	if _, err := MakeEnvironment(pod, c, EnvFacts{}, objs); err == nil {
		t.Error("a missing non-optional secret key must fail the container start")
	}
}
