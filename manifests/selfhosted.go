package manifests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"
	kubeadmutil "k8s.io/kubernetes/cmd/kubeadm/app/util"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/credmirror"
	mastersrules "github.com/bootlet/bootlet/masters"
	btypes "github.com/bootlet/bootlet/types"
)

// Conventions of the self-hosted objects.
const (
	// LabelApp selects the self-hosted pods. kubeadm's static pods (and so
	// the mirror pods of the bootstrap pods) carry component= and tier=, but
	// not k8s-app=, so no controller adopts or counts a bootstrap pod.
	LabelApp = "k8s-app"
	// selfHostedReplicas of the controller-manager's and scheduler's
	// Deployments (one master): two, so the PDB (minAvailable 1) lets a
	// drain proceed one pod at a time while leader election keeps one
	// active.
	selfHostedReplicas = 2
)

// selfHostedFiles are the files of self-hosted/, by name, each a list of
// objects written as one multi-document YAML file. assetDir is where the
// credentials are read; nodeDir is where the node finds the asset dir,
// under which bootlet mirrors them (CredentialDir).
func selfHostedFiles(c Config, assetDir, nodeDir string) (map[string][]runtime.Object, error) {
	specs := kubeadmPods(c)
	files := map[string][]runtime.Object{
		"rbac.yaml":          {kubeletAPIAdminBinding(), nodeCertRotationBinding()},
		ClusterVersionFile:   {ClusterVersionCRD()},
		CheckpointerRBACFile: checkpointerRBAC(),
		NodeGuardPolicyFile:  nodeGuardPolicy(),
		UpgradeAgentRBACFile: upgradeAgentRBAC(),
	}
	for _, name := range []string{KubeAPIServer, KubeControllerManager, KubeScheduler} {
		pod := specs[name]
		secret, err := credentialSecret(name, pod.Spec.Containers[0].Command, assetDir, nodeDir)
		if err != nil {
			return nil, err
		}
		tmpl, err := selfHostedTemplate(&pod, secret)
		if err != nil {
			return nil, err
		}
		objs := []runtime.Object{secret}
		if name == KubeAPIServer {
			if len(c.Masters) > 0 {
				advertiseHostIP(&tmpl)
			}
			objs = append(objs, apiserverDaemonSet(tmpl))
		} else {
			objs = append(objs, electedWorkload(name, tmpl, len(c.Masters)), pdb(name, len(c.Masters)))
		}
		files[name+".yaml"] = objs
	}
	addons, err := addonFiles(c)
	if err != nil {
		return nil, err
	}
	for name, objs := range addons {
		files[name] = objs
	}
	return files, nil
}

// credentialFiles are the files under /etc/kubernetes that a command's flags
// name (--kubeconfig=/etc/kubernetes/scheduler.conf, --tls-cert-file=...),
// relative to /etc/kubernetes, sorted. The Secret of a self-hosted component
// carries exactly these, so its flags stay kubeadm's.
func credentialFiles(command []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, arg := range command {
		if !strings.HasPrefix(arg, "--") {
			continue
		}
		_, val, ok := strings.Cut(arg, "=")
		if !ok {
			continue
		}
		if rel, ok := underKubernetesDir(val); ok && rel != "." && !seen[rel] {
			seen[rel] = true
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out
}

// secretKey is the Secret key of a credential file: its path relative to
// pki/ (or to /etc/kubernetes for kubeconfigs) with / made -, since keys
// cannot hold a slash. The volume's items map it back to the path.
func secretKey(rel string) string {
	return strings.ReplaceAll(strings.TrimPrefix(rel, PKIDir+"/"), "/", "-")
}

// CredentialsDir is the directory of the asset dir under which each master's
// bootlet mirrors the credential Secrets, one directory per component
// (package credmirror).
const CredentialsDir = "credentials"

// CredentialDir is the host directory of component NAME's credentials
// under the node's asset dir.
func CredentialDir(nodeDir, name string) string {
	return filepath.Join(nodeDir, CredentialsDir, name)
}

// credentialSecret is kube-system/NAME holding the credential files the
// component's flags name, read from the rendered asset dir. No pod mounts
// it (so no kubelet may read it); its annotations tell bootlet where to
// mirror it on every master (credmirror.Annotate).
func credentialSecret(name string, command []string, assetDir, nodeDir string) (*v1.Secret, error) {
	s := &v1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, Labels: map[string]string{LabelApp: name}},
		Type:       v1.SecretTypeOpaque,
		Data:       map[string][]byte{},
	}
	var items []v1.KeyToPath
	for _, rel := range credentialFiles(command) {
		data, err := os.ReadFile(filepath.Join(assetDir, rel))
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", name, err)
		}
		key := secretKey(rel)
		if _, dup := s.Data[key]; dup {
			return nil, fmt.Errorf("secret %s: two files map to key %q", name, key)
		}
		s.Data[key] = data
		items = append(items, v1.KeyToPath{Key: key, Path: rel})
	}
	if err := credmirror.Annotate(s, credmirror.Target{Dir: CredentialDir(nodeDir, name), Items: items}); err != nil {
		return nil, err
	}
	return s, nil
}

// selfHostedTemplate turns kubeadm's static pod into the pod template of its self-hosted incarnation;
// what changes and why: docs/control-plane.md, "Self-hosted objects".
func selfHostedTemplate(pod *v1.Pod, secret *v1.Secret) (v1.PodTemplateSpec, error) {
	p := pod.DeepCopy()
	spec := &p.Spec
	if len(spec.Containers) != 1 {
		return v1.PodTemplateSpec{}, fmt.Errorf("%s: expected one container", p.Name)
	}
	ctr := &spec.Containers[0]

	dropped := map[string]bool{}
	var vols []v1.Volume
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			if _, ok := underKubernetesDir(v.HostPath.Path); ok {
				dropped[v.Name] = true
				continue
			}
		}
		vols = append(vols, v)
	}
	target, ok, err := credmirror.TargetOf(secret)
	if err != nil || !ok {
		return v1.PodTemplateSpec{}, fmt.Errorf("%s: the credential Secret has no mirror target (%v)", p.Name, err)
	}
	// The mirror, not the Secret: a Secret volume would let the Node
	// authorizer hand ca.key and sa.key to every master's kubelet
	// credential (docs/security.md, Trust model).
	const credVolume = "kubernetes"
	spec.Volumes = append(vols, v1.Volume{Name: credVolume, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{
		Path: target.Dir, Type: ptr.To(v1.HostPathDirectory),
	}}})
	var mounts []v1.VolumeMount
	for _, m := range ctr.VolumeMounts {
		if !dropped[m.Name] {
			mounts = append(mounts, m)
		}
	}
	ctr.VolumeMounts = append(mounts, v1.VolumeMount{Name: credVolume, MountPath: containerKubernetesDir, ReadOnly: true})

	ports := map[string]int32{}
	for _, port := range ctr.Ports {
		ports[port.Name] = port.ContainerPort
	}
	for _, probe := range []*v1.Probe{ctr.LivenessProbe, ctr.ReadinessProbe, ctr.StartupProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Port.Type != intstr.String {
			continue
		}
		n, ok := ports[probe.HTTPGet.Port.StrVal]
		if !ok {
			return v1.PodTemplateSpec{}, fmt.Errorf("%s: probe names unknown port %q", p.Name, probe.HTTPGet.Port.StrVal)
		}
		probe.HTTPGet.Port = intstr.FromInt32(n)
	}
	ctr.Ports = nil

	spec.Priority = nil
	spec.AutomountServiceAccountToken = ptr.To(false)
	spec.NodeSelector = map[string]string{btypes.LabelControlPlanePods: ""}
	spec.Tolerations = tolerations()

	labels := map[string]string{LabelApp: p.Name, "tier": kubeadmconstants.ControlPlaneTier}
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: p.Annotations},
		Spec:       *spec,
	}, nil
}

// tolerations of every self-hosted pod: the control-plane taint, and
// not-ready and unreachable forever. A node without a CNI plugin stays
// NotReady, but these pods are hostNetwork and need no pod network; without
// the not-ready toleration the scheduler would never place them there, and
// the default 300 s NoExecute toleration would evict the controller-manager's
// and scheduler's pods from a node that the control plane itself runs on.
//
// The node-pressure taints (disk, memory, PIDs) are tolerated as the
// DaemonSet controller tolerates them for every DaemonSet pod: the kubelet
// admits a critical pod under pressure, and these pods are what the cluster
// needs to get out of it. Without them a master whose disk crossed the
// kubelet's imagefs threshold (15% available) leaves the controller-manager's
// and scheduler's pods Pending, and the pivot never completes.
func tolerations() []v1.Toleration {
	return []v1.Toleration{
		{Key: btypes.LabelControlPlane, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists},
		{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists},
		{Key: v1.TaintNodeDiskPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodePIDPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	}
}

func selector(name string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{LabelApp: name}}
}

// The rolling update's hand-over of the port
// (docs/design/reuseport.md, "Rolling updates: the preStop sleep"): the old
// pod, deleted by the DaemonSet controller, keeps serving for
// apiserverPreStopSleep before its SIGTERM, while the router already gives
// every new connection to the new pod and its kept-alive HTTP/2 clients
// leave on the GOAWAY chances (--goaway-chance=0.02). The grace period
// covers the sleep, the shutdown delay (5 s), the watch termination grace
// (10 s) and a margin, so the kubelet never SIGKILLs it.
const (
	apiserverPreStopSleep        = 15
	apiserverTerminationGraceSec = apiserverPreStopSleep + 5 + 10 + 10
)

// apiserverDaemonSet runs the apiserver on every control-plane node. It
// surges: the new pod starts next to the old one on the same node (they share
// the port) and the old one goes only once the new one is Ready, so an
// upgrade has no moment without an apiserver.
//
// Ready includes the readiness gate btypes.PodConditionServing, which
// bootlet on the node sets only once the pod's own process serves: the
// kubelet's probe of the new pod is a new connection to the shared port,
// which the router gives to the old apiserver until the new one serves, so
// without the gate the new pod would be Ready (and the old one deleted)
// before it serves anything.
func apiserverDaemonSet(tmpl v1.PodTemplateSpec) *appsv1.DaemonSet {
	tmpl.Annotations = withAnnotation(tmpl.Annotations, btypes.AnnotationCheckpoint, "true")
	tmpl.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: btypes.PodConditionServing}}
	tmpl.Spec.TerminationGracePeriodSeconds = ptr.To[int64](apiserverTerminationGraceSec)
	tmpl.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: apiserverPreStopSleep}}}
	maxUnavailable, maxSurge := intstr.FromInt32(0), intstr.FromInt32(1)
	return daemonSet(KubeAPIServer, tmpl, appsv1.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable, MaxSurge: &maxSurge})
}

// daemonSet is a kube-system DaemonSet of one control-plane component,
// rolled out as rolling says.
func daemonSet(name string, tmpl v1.PodTemplateSpec, rolling appsv1.RollingUpdateDaemonSet) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, Labels: tmpl.Labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: selector(name),
			Template: tmpl,
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &rolling,
			},
		},
	}
}

// hostIPEnv is the self-hosted apiserver's own node IP, from the downward
// API; --advertise-address names it.
const hostIPEnv = "HOST_IP"

// advertiseHostIP makes the apiserver template advertise the IP of the
// node its pod runs on rather than the rendering master's: with several
// masters one DaemonSet, from one Secret, runs on all of them, and each
// apiserver must advertise its own address (default/kubernetes lists every
// master; the pivot waits for its node's). The IP comes from status.hostIP,
// which the kubelet fills from the node's address and bootlet's runner from
// the same first address of the node (runner.NodeIPs), so a checkpoint
// restores it. kubeadm's probe host and its advertise-address annotation
// would name the rendering master too: the probes go to the pod's IP
// instead (a hostNetwork pod's is its node's), and the annotation goes.
func advertiseHostIP(tmpl *v1.PodTemplateSpec) {
	ctr := &tmpl.Spec.Containers[0]
	for i, arg := range ctr.Command {
		if strings.HasPrefix(arg, "--advertise-address=") {
			ctr.Command[i] = "--advertise-address=$(" + hostIPEnv + ")"
		}
	}
	ctr.Env = append([]v1.EnvVar{{Name: hostIPEnv, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.hostIP"}}}}, ctr.Env...)
	for _, probe := range []*v1.Probe{ctr.LivenessProbe, ctr.ReadinessProbe, ctr.StartupProbe} {
		if probe != nil && probe.HTTPGet != nil {
			probe.HTTPGet.Host = ""
		}
	}
	delete(tmpl.Annotations, kubeadmconstants.KubeAPIServerAdvertiseAddressEndpointAnnotationKey)
}

// electedWorkload runs the controller-manager or the scheduler. Both keep
// kubeadm's --leader-elect=true, so of their pods (and of the bootstrap pod
// during the pivot) only one acts. They are system-cluster-critical, not
// system-node-critical like the static pods: nothing of the node depends
// on them, and with one master a Deployment's pod may move.
//
// With one master (or none: a single node) it is a Deployment of
// selfHostedReplicas with a preferred anti-affinity. With several masters
// (masters > 1) it is a DaemonSet on the control-plane nodes, as the
// apiserver's: each master's pivot withdraws its bootstrap pod only once a
// self-hosted pod runs on its own node, so every master needs exactly one.
// A Deployment with one replica per master and a required anti-affinity
// (the obvious design) does not guarantee it: in a three-master run a
// bind through the VIP failed on the client's side but succeeded on the
// server's, the scheduler that took over (its cache stale) bound a second
// replica to the same master, and the anti-affinity, IgnoredDuringExecution,
// never moved it; the third master's pivot waited for ever
// (docs/cluster.md, "Three masters"). The DaemonSet controller pins each
// pod to its node and deletes a node's duplicates.
func electedWorkload(name string, tmpl v1.PodTemplateSpec, masters int) runtime.Object {
	tmpl.Spec.PriorityClassName = "system-cluster-critical"
	if masters > 1 {
		return mastersDaemonSet(name, tmpl)
	}
	return deployment(name, tmpl)
}

// deployment is electedWorkload's with one master or a single node: two
// replicas, so the PDB (minAvailable 1) lets a drain proceed one pod at a
// time, on two nodes where the scheduler can.
func deployment(name string, tmpl v1.PodTemplateSpec) *appsv1.Deployment {
	term := v1.PodAffinityTerm{LabelSelector: selector(name), TopologyKey: v1.LabelHostname}
	tmpl.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: term}},
	}}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, Labels: tmpl.Labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](selfHostedReplicas),
			Selector: selector(name),
			Template: tmpl,
		},
	}
}

// mastersDaemonSet is electedWorkload's with several masters: the
// template's nodeSelector and tolerations (selfHostedTemplate's, the
// apiserver DaemonSet's) put one pod on every control-plane node. A rolling
// update replaces one master's pod at a time, the old one first: unlike the
// apiserver's, these pods share no port to hand over, and leader election
// leaves the other masters' pods to act meanwhile.
func mastersDaemonSet(name string, tmpl v1.PodTemplateSpec) *appsv1.DaemonSet {
	maxUnavailable := intstr.FromInt32(1)
	return daemonSet(name, tmpl, appsv1.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable})
}

// pdb lets one pod at a time be evicted: minAvailable 1 of the
// Deployment's two with one master; with several masters, minAvailable
// masters-1 of the DaemonSet's one per master, which is maxUnavailable 1.
// Not maxUnavailable itself: the disruption controller resolves it (and a
// percentage) through the pods' controller's scale subresource, which a
// DaemonSet lacks, and a budget it cannot resolve allows no eviction at
// all; an integer minAvailable it counts against the pods it finds. A
// drain leaves DaemonSet pods alone (kubectl drain --ignore-daemonsets),
// so the budget binds evictions through the API.
func pdb(name string, masters int) *policyv1.PodDisruptionBudget {
	minAvailable := intstr.FromInt32(int32(mastersrules.BudgetMinAvailable(masters)))
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, Labels: map[string]string{LabelApp: name}},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: selector(name)},
	}
}

// kubeletAPIAdminBinding is kubeadm's kubeadm:apiserver-kubelet-client
// binding: it lets the apiserver's kubelet-client certificate use the
// kubelet API (logs, exec, port-forward) once a kubelet serves the node.
// The controller-manager and scheduler need no binding of their own: they
// authenticate as system:kube-controller-manager and system:kube-scheduler,
// which the apiserver's bootstrap RBAC policy already covers, leases
// included.
func kubeletAPIAdminBinding() *rbacv1.ClusterRoleBinding {
	return clusterRoleBinding(kubeadmconstants.KubeletAPIAdminClusterRoleBindingName, kubeadmconstants.KubeletAPIAdminClusterRoleName,
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeadmconstants.APIServerKubeletClientCertCommonName})
}

// nodeCertRotationBinding is kubeadm's
// kubeadm:node-autoapprove-certificate-rotation binding: with it the
// controller-manager's CSR approver approves a kubelet's renewal of its own
// client certificate (the one kubelet.conf starts with).
func nodeCertRotationBinding() *rbacv1.ClusterRoleBinding {
	return clusterRoleBinding(kubeadmconstants.NodeAutoApproveCertificateRotationClusterRoleBinding, kubeadmconstants.NodeSelfCSRAutoApprovalClusterRoleName,
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: kubeadmconstants.NodesGroup})
}

// clusterRoleBinding binds the ClusterRole role to one subject.
func clusterRoleBinding(name, role string, subject rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{subject},
	}
}

func withAnnotation(in map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for key, val := range in {
		out[key] = val
	}
	return out
}

// marshalObjects writes objects as one multi-document YAML stream with the
// Kubernetes YAML serializer (fields in struct order, map keys sorted).
func marshalObjects(objs []runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	for i, obj := range objs {
		gvk := obj.GetObjectKind().GroupVersionKind()
		data, err := kubeadmutil.MarshalToYaml(obj, gvk.GroupVersion())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gvk.Kind, err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(data)
	}
	return buf.Bytes(), nil
}
