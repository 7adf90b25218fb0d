package handoff

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	k8sv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/apis/core/validation"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/runner"
	btypes "github.com/bootlet/bootlet/types"
)

// objects is an in-memory cri.ObjectSource.
type objects struct {
	secrets    map[string]*v1.Secret
	configMaps map[string]*v1.ConfigMap
}

func (o objects) GetSecret(ns, name string) (*v1.Secret, error) {
	if s, ok := o.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (o objects) GetConfigMap(ns, name string) (*v1.ConfigMap, error) {
	if c, ok := o.configMaps[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

var noObjects = objects{}

func handoffTestObjects() objects {
	return objects{
		secrets: map[string]*v1.Secret{"ns/creds": {ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "ns"},
			Data: map[string][]byte{"password": []byte("pa$(HOME)ss"), "user": []byte("admin")}}},
		configMaps: map[string]*v1.ConfigMap{"ns/conf": {ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: "ns"},
			Data: map[string]string{"LEVEL": "debug", "MODE": "fast", "dollar": "$$x", "password": "pa$(HOME)ss", "user": "admin"}}},
	}
}

func optional() *bool { b := true; return &b }

// handoffTestPod uses every kind of reference the static copy rewrites
// (Secrets only as volumes: a Secret in env gets no static copy).
func handoffTestPod() *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "0f0e0d0c-1111-2222-3333-444455556666",
			Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{"kubernetes.io/config.hash": "0f0e0d0c-1111-2222-3333-444455556666", btypes.AnnotationManagedBy: btypes.ManagedByValue,
				btypes.AnnotationOwner: string(btypes.OwnerBootlet), "example.com/note": "kept"},
			ResourceVersion: "42", Generation: 1, CreationTimestamp: metav1.Now()},
		Spec: v1.PodSpec{
			NodeName:         "node1",
			ImagePullSecrets: []v1.LocalObjectReference{{Name: "pull"}},
			Volumes: []v1.Volume{
				{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds"}}},
				{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "conf"}}}},
				{Name: "mixed", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "conf"}}},
					{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
				}}}},
				{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
				{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc/ssl"}}},
			},
			InitContainers: []v1.Container{{Name: "init", Image: "busybox:1.36", Command: []string{"true"},
				EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "conf"}}}}}},
			Containers: []v1.Container{{
				Name: "main", Image: "busybox:1.36", Command: []string{"sh", "-c", "echo $(USER) $(CFG_LEVEL)"},
				EnvFrom: []v1.EnvFromSource{
					{Prefix: "CFG_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "conf"}}},
					{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Optional: optional()}},
				},
				Env: []v1.EnvVar{
					{Name: "GREETING", Value: "hi $(CFG_MODE)"},
					{Name: "USER", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "conf"}, Key: "user"}}},
					{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "conf"}, Key: "password"}}},
					{Name: "CFG_MODE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "conf"}, Key: "MODE"}}},
					{Name: "AFTER", Value: "$(CFG_MODE)-$(PASSWORD)"},
					{Name: "MISSING_OPT", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "conf"}, Key: "nope", Optional: optional()}}},
					{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
				},
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}},
				VolumeMounts: []v1.VolumeMount{{Name: "secret", MountPath: "/secret"}, {Name: "conf", MountPath: "/conf"},
					{Name: "scratch", MountPath: "/scratch"}, {Name: "mixed", MountPath: "/mixed"}, {Name: "info", MountPath: "/info"}},
			}},
		},
	}
	legacyscheme.Scheme.Default(p)
	return p
}

func TestStaticPod(t *testing.T) {
	dirs := runner.PodDirs{Root: "/var/lib/bootlet"}
	pod := handoffTestPod()
	orig := pod.DeepCopy()
	got, err := StaticPod(pod, runner.MaterialisedVolumeDirs(dirs, pod), handoffTestObjects())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pod, orig) {
		t.Error("StaticPod changed its input")
	}
	// Identity: the kubelet names it NAME-NODENAME and keys it by this UID.
	if got.Name != "web" || got.Namespace != "ns" || got.UID != pod.UID || got.Labels["app"] != "web" {
		t.Errorf("identity: %s/%s uid %s labels %v", got.Namespace, got.Name, got.UID, got.Labels)
	}
	if got.APIVersion != "v1" || got.Kind != "Pod" {
		t.Errorf("type meta %v", got.TypeMeta)
	}
	wantAnn := map[string]string{btypes.AnnotationManagedBy: btypes.ManagedByValue, "example.com/note": "kept"}
	if !reflect.DeepEqual(got.Annotations, wantAnn) {
		t.Errorf("annotations %v, want %v", got.Annotations, wantAnn)
	}
	if got.ResourceVersion != "" || got.Generation != 0 || !got.CreationTimestamp.IsZero() || got.Spec.NodeName != "" || got.Spec.ImagePullSecrets != nil {
		t.Errorf("bookkeeping left in: rv %q gen %d created %v node %q pull secrets %v", got.ResourceVersion, got.Generation, got.CreationTimestamp, got.Spec.NodeName, got.Spec.ImagePullSecrets)
	}
	// Volumes: object references become hostPaths on bootlet's volume dirs.
	dir := v1.HostPathDirectory
	uid := string(pod.UID)
	wantVols := map[string]v1.VolumeSource{
		"scratch": {EmptyDir: &v1.EmptyDirVolumeSource{}},
		"secret":  {HostPath: &v1.HostPathVolumeSource{Path: "/var/lib/bootlet/pods/" + uid + "/volumes/kubernetes.io~secret/secret", Type: &dir}},
		"conf":    {HostPath: &v1.HostPathVolumeSource{Path: "/var/lib/bootlet/pods/" + uid + "/volumes/kubernetes.io~configmap/conf", Type: &dir}},
		"mixed":   {HostPath: &v1.HostPathVolumeSource{Path: "/var/lib/bootlet/pods/" + uid + "/volumes/kubernetes.io~projected/mixed", Type: &dir}},
		"info":    pod.Spec.Volumes[4].VolumeSource,
		"host":    pod.Spec.Volumes[5].VolumeSource,
	}
	if len(got.Spec.Volumes) != len(wantVols) {
		t.Fatalf("%d volumes, want %d", len(got.Spec.Volumes), len(wantVols))
	}
	for _, v := range got.Spec.Volumes {
		if !reflect.DeepEqual(v.VolumeSource, wantVols[v.Name]) {
			t.Errorf("volume %s: %+v, want %+v", v.Name, v.VolumeSource, wantVols[v.Name])
		}
	}
	// The kubelet keeps a running container only if its hash matches.
	for i, c := range got.Spec.Containers {
		if h, w := kubecontainer.HashContainer(&c), kubecontainer.HashContainer(&pod.Spec.Containers[i]); h != w {
			t.Errorf("container %s: hash %x, want %x", c.Name, h, w)
		}
		if len(c.EnvFrom) != 0 {
			t.Errorf("container %s keeps envFrom", c.Name)
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef != nil || e.ValueFrom.ConfigMapKeyRef != nil) {
				t.Errorf("container %s: env %s still references an object", c.Name, e.Name)
			}
		}
	}
	if h, w := kubecontainer.HashContainer(&got.Spec.InitContainers[0]), kubecontainer.HashContainer(&pod.Spec.InitContainers[0]); h != w {
		t.Errorf("init container hash %x, want %x", h, w)
	}
	// The kubelet must accept it as a static pod: its file source decodes
	// with legacyscheme and validates with ValidatePodCreate.
	internal := &api.Pod{}
	withNode := got.DeepCopy()
	withNode.Spec.NodeName = "node1"
	legacyscheme.Scheme.Default(withNode)
	if err := k8sv1.Convert_v1_Pod_To_core_Pod(withNode, internal, nil); err != nil {
		t.Fatal(err)
	}
	if errs := validation.ValidatePodCreate(internal, validation.PodValidationOptions{}); len(errs) > 0 {
		t.Errorf("the static copy does not validate: %v", errs)
	}
}

// TestStaticPodEnvIsTheSame: the environment the kubelet builds for the
// static copy (with no objects at all) is exactly what bootlet built for
// the original from its Secrets and ConfigMaps, $(VAR) expansion included.
func TestStaticPodEnvIsTheSame(t *testing.T) {
	pod := handoffTestPod()
	objs := handoffTestObjects()
	got, err := StaticPod(pod, runner.MaterialisedVolumeDirs(runner.PodDirs{Root: "/r"}, pod), objs)
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.NodeName = pod.Spec.NodeName // the kubelet sets it
	facts := cri.EnvFacts{HostIPs: []string{"10.0.0.1"}}
	for i := range pod.Spec.Containers {
		want, err := cri.MakeEnvironment(pod, &pod.Spec.Containers[i], facts, objs)
		if err != nil {
			t.Fatal(err)
		}
		have, err := cri.MakeEnvironment(got, &got.Spec.Containers[i], facts, noObjects)
		if err != nil {
			t.Fatalf("the static copy still needs an object: %v", err)
		}
		if w, h := envMap(want), envMap(have); !reflect.DeepEqual(w, h) {
			t.Errorf("container %s env:\n got %v\nwant %v", pod.Spec.Containers[i].Name, h, w)
		}
	}
	// Spot checks of the semantics themselves.
	env := envMap(mustEnv(t, got, 0))
	for k, v := range map[string]string{"PASSWORD": "pa$(HOME)ss", "CFG_MODE": "fast", "GREETING": "hi fast", "AFTER": "fast-pa$(HOME)ss",
		"CFG_dollar": "$$x", "USER": "admin", "NODE": "node1"} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["MISSING_OPT"]; ok {
		t.Error("a missing optional key became a variable")
	}
}

func mustEnv(t *testing.T, pod *v1.Pod, i int) []kubecontainer.EnvVar {
	env, err := cri.MakeEnvironment(pod, &pod.Spec.Containers[i], cri.EnvFacts{HostIPs: []string{"10.0.0.1"}}, noObjects)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func envMap(env []kubecontainer.EnvVar) map[string]string {
	out := map[string]string{}
	for _, e := range env {
		out[e.Name] = e.Value
	}
	return out
}

func TestStaticPodMissingRequiredObject(t *testing.T) {
	pod := handoffTestPod()
	if _, err := StaticPod(pod, runner.MaterialisedVolumeDirs(runner.PodDirs{Root: "/r"}, pod), noObjects); err == nil || !strings.Contains(err.Error(), "conf") {
		t.Errorf("err = %v, want a not-found error naming the config map", err)
	}
}

// TestStaticPodRefusesSecretEnv: no Secret value ever goes into a static
// pod file (and from it into the kubelet's mirror pod), whichever
// container takes it and however; ConfigMap references and Secret volumes
// are fine. The Secret value must not appear in the error either.
func TestStaticPodRefusesSecretEnv(t *testing.T) {
	secretKey := &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}, Key: "password"}}
	secretFrom := v1.EnvFromSource{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}}}
	objs := objects{secrets: map[string]*v1.Secret{"ns/creds": {ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "ns"},
		Data: map[string][]byte{"password": []byte("hunter2-value")}}}, configMaps: handoffTestObjects().configMaps}
	for _, tc := range []struct {
		name   string
		edit   func(*v1.Pod)
		fields []string // empty: a static copy is written
	}{
		{"config maps and secret volumes only", func(*v1.Pod) {}, nil},
		{"secretKeyRef in a container", func(p *v1.Pod) {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, v1.EnvVar{Name: "S", ValueFrom: secretKey})
		}, []string{"spec.containers[0].env[7].valueFrom.secretKeyRef"}},
		{"envFrom secretRef in an init container", func(p *v1.Pod) {
			p.Spec.InitContainers[0].EnvFrom = append(p.Spec.InitContainers[0].EnvFrom, secretFrom)
		}, []string{"spec.initContainers[0].envFrom[1].secretRef"}},
		{"both, in an ephemeral container too", func(p *v1.Pod) {
			p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{secretFrom}
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "busybox",
				Env: []v1.EnvVar{{Name: "S", ValueFrom: secretKey}}}}}
		}, []string{"spec.containers[0].envFrom[0].secretRef", "spec.ephemeralContainers[0].env[0].valueFrom.secretKeyRef"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := handoffTestPod()
			tc.edit(pod)
			got, err := StaticPod(pod, runner.MaterialisedVolumeDirs(runner.PodDirs{Root: "/r"}, pod), objs)
			if len(tc.fields) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var refused *SecretEnvError
			if !errors.As(err, &refused) {
				t.Fatalf("StaticPod = %v, %v; want a SecretEnvError", got, err)
			}
			var fields []string
			for _, f := range refused.Fields {
				fields = append(fields, f.Field)
			}
			if !reflect.DeepEqual(fields, tc.fields) {
				t.Errorf("fields %v, want %v", fields, tc.fields)
			}
			if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "volume") {
				t.Errorf("error %q leaks the value or does not say to mount a volume", err)
			}
		})
	}
	// The last line of defence: literalEnv itself never reads a Secret.
	pod := handoffTestPod()
	c := pod.Spec.Containers[0].DeepCopy()
	for _, c := range []*v1.Container{
		{Name: "a", Env: []v1.EnvVar{{Name: "S", ValueFrom: secretKey}}},
		{Name: "b", EnvFrom: []v1.EnvFromSource{secretFrom}},
		c,
	} {
		env, err := literalEnv(pod, c, objs)
		if c.Name == "main" {
			if err != nil {
				t.Errorf("literalEnv(main): %v", err)
			}
			continue
		}
		if err == nil || strings.Contains(fmt.Sprint(env), "hunter2") {
			t.Errorf("literalEnv(%s) = %v, %v; want a refusal", c.Name, env, err)
		}
	}
}

func TestStaticPodFileName(t *testing.T) {
	if got := StaticPodFileName("kube-system", "kube-apiserver"); got != "bootlet_kube-system_kube-apiserver.yaml" {
		t.Errorf("got %s", got)
	}
}

func TestActuatedResources(t *testing.T) {
	pod := handoffTestPod()
	got := actuatedResources(pod, &pod.Spec.Containers[0])
	// Defaulting copied the limits into the requests, as the kubelet's
	// static pod defaulting does.
	var names []string
	for k, v := range got.Requests {
		names = append(names, fmt.Sprintf("req %s=%s", k, v.String()))
	}
	for k, v := range got.Limits {
		names = append(names, fmt.Sprintf("lim %s=%s", k, v.String()))
	}
	sort.Strings(names)
	want := "lim cpu=100m lim memory=64Mi req cpu=100m req memory=64Mi"
	if strings.Join(names, " ") != want {
		t.Errorf("actuated %v, want %s", names, want)
	}
	if actuatedKey(pod) == "" || actuatedKey(pod) == actuatedKey(&v1.Pod{}) {
		t.Error("actuatedKey does not tell pods apart")
	}
}
