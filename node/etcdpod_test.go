package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/config"
	"github.com/bootlet/bootlet/masters"
	"github.com/bootlet/bootlet/masters/nodekeys"
	"github.com/bootlet/bootlet/podapi"
	"github.com/bootlet/bootlet/runner"
	btypes "github.com/bootlet/bootlet/types"
)

// etcdImage is the image the member's stored pod runs, as the node
// agent reads it.
func etcdImage(e etcdPod) (string, error) {
	p, err := e.MemberPod()
	if err != nil {
		return "", err
	}
	if p == nil {
		return "", errors.New("no member's pod")
	}
	return p.Spec.Containers[0].Image, nil
}

// newEtcdPod is an empty store of m1 and the etcd step's view of it.
func newEtcdPod(t *testing.T) (*podapi.Registry, etcdPod) {
	t.Helper()
	store, err := checkpoint.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := podapi.NewRegistry("m1", store)
	if err != nil {
		t.Fatal(err)
	}
	reg.SetRuntime(&runner.RuntimeGate{})
	return reg, etcdPod{reg: reg, root: t.TempDir()}
}

// The etcd step's write: the stored etcd pod's image changes, nothing else
// of it, and a store without an etcd pod says so.
func TestEtcdPodImage(t *testing.T) {
	reg, e := newEtcdPod(t)
	if _, err := etcdImage(e); err == nil {
		t.Errorf("an empty store gave an etcd image")
	}
	in := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: metav1.NamespaceSystem},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.8-0", Command: []string{"etcd"}}}}}
	created, err := reg.CreatePod(in, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := etcdImage(e); err != nil || got != "registry.k8s.io/etcd:3.6.8-0" {
		t.Fatalf("the member's image = %q, %v", got, err)
	}
	if err := e.SetEtcdImage("registry.k8s.io/etcd:3.7.0-0"); err != nil {
		t.Fatal(err)
	}
	p, err := reg.GetPod(metav1.NamespaceSystem, "etcd")
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Spec.Containers[0]; c.Image != "registry.k8s.io/etcd:3.7.0-0" || len(c.Command) != 1 || p.UID != created.UID {
		t.Errorf("after SetEtcdImage: %+v, UID %s (was %s)", c, p.UID, created.UID)
	}
}

// A one-member step's helper pods: stored beside the member's, never
// taken for it, and only a helper's pod is created or deleted through
// them.
func TestEtcdHelperPods(t *testing.T) {
	reg, e := newEtcdPod(t)
	mk := func(name string, labels map[string]string, image string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, Labels: labels},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "etcd", Image: image, Command: []string{"etcd"}}}}}
	}
	helper := mk("etcd-upgrade-helper-1", map[string]string{btypes.LabelEtcdUpgradeHelper: "m1-upgrade-helper-1"}, "registry.k8s.io/etcd:3.6.8-0")
	if err := e.CreateHelper(helper); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateHelper(mk("etcd-other", nil, "x")); err == nil {
		t.Errorf("a pod with no helper label was created as a helper")
	}
	if _, err := reg.CreatePod(mk("etcd", nil, "registry.k8s.io/etcd:3.7.0-0"), false); err != nil {
		t.Fatal(err)
	}
	if got, err := etcdImage(e); err != nil || got != "registry.k8s.io/etcd:3.7.0-0" {
		t.Errorf("the member's image = %q, %v: the helper was taken for the member", got, err)
	}
	if hp, err := e.HelperPods(); err != nil || len(hp) != 1 || hp["etcd-upgrade-helper-1"] == nil {
		t.Errorf("HelperPods = %v, %v", hp, err)
	}
	if err := e.DeleteHelper("etcd"); err == nil {
		t.Errorf("the member's pod was deleted as a helper")
	}
	if err := e.DeleteHelper("etcd-upgrade-helper-1"); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteHelper("etcd-upgrade-helper-1"); err != nil {
		t.Errorf("deleting a helper already gone: %v", err)
	}
	if _, err := reg.GetPod(metav1.NamespaceSystem, "etcd"); err != nil {
		t.Errorf("the member's pod: %v", err)
	}
}

// A demotion sets the member aside (its pod kept, its data renamed, not
// deleted) and the next promotion starts it again as a learner of the
// cluster as it is then, on an empty data directory.
func TestEtcdMemberAsideAndBack(t *testing.T) {
	reg, e := newEtcdPod(t)
	data := filepath.Join(t.TempDir(), "etcd")
	if err := os.MkdirAll(filepath.Join(data, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	in := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: metav1.NamespaceSystem},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.8-0",
			Command: []string{"etcd", "--name=m2", "--data-dir=/var/lib/etcd", "--initial-cluster=m1=https://10.0.0.11:2380,m2=https://10.0.0.12:2380", "--initial-cluster-state=new",
				"--initial-advertise-peer-urls=https://10.0.0.12:2380", "--listen-client-urls=https://127.0.0.1:2379,https://10.0.0.12:2379",
				"--listen-metrics-urls=http://127.0.0.1:2381", "--trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt"},
			VolumeMounts: []v1.VolumeMount{{Name: "etcd-data", MountPath: "/var/lib/etcd"}, {Name: "etcd-certs", MountPath: "/etc/kubernetes/pki/etcd"}}}},
			Volumes: []v1.Volume{{Name: "etcd-data", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: data}}},
				{Name: "etcd-certs", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc/kubernetes/pki/etcd"}}}}}}
	if _, err := reg.CreatePod(in, false); err != nil {
		t.Fatal(err)
	}
	if stored, aside, _ := e.HasMember(); !stored || aside {
		t.Fatalf("HasMember before: %v %v", stored, aside)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	moved, err := e.SetAside(now)
	if err != nil {
		t.Fatal(err)
	}
	if want := data + ".removed-20261130T120000Z"; moved != want {
		t.Errorf("data moved to %q, want %q", moved, want)
	}
	if _, err := os.Stat(filepath.Join(moved, "member")); err != nil {
		t.Errorf("the data is not kept: %v", err)
	}
	if p, err := e.MemberPod(); p != nil || err != nil {
		t.Errorf("the member's pod is still stored: %v %v", p, err)
	}
	if stored, aside, _ := e.HasMember(); stored || !aside {
		t.Fatalf("HasMember after: %v %v", stored, aside)
	}
	// The runner reports the pod stopped, as it does once the kubelet has
	// given up its static copy.
	if p, err := reg.GetPod(metav1.NamespaceSystem, "etcd"); err == nil {
		reg.PodTerminated(btypes.PodKey{Namespace: p.Namespace, Name: p.Name}, p.UID)
	}
	// Set aside again: nothing left to do, no error.
	if moved, err := e.SetAside(now); moved != "" || err != nil {
		t.Errorf("SetAside again: %q %v", moved, err)
	}
	if _, _, learner := e.HasMember(); learner != 0 {
		t.Errorf("no member stored, but a learner: %x", learner)
	}
	if err := e.StartLearner("m1=https://10.0.0.11:2380,m3=https://10.0.0.13:2380,m2=https://10.0.0.12:2380", 0x9a, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	p, err := e.MemberPod()
	if err != nil || p == nil {
		t.Fatalf("no member after StartLearner: %v", err)
	}
	cmd := strings.Join(p.Spec.Containers[0].Command, " ")
	for _, want := range []string{"--name=m2", "--initial-cluster=m1=https://10.0.0.11:2380,m3=https://10.0.0.13:2380,m2=https://10.0.0.12:2380", "--initial-cluster-state=existing"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("command %q lacks %s", cmd, want)
		}
	}
	if strings.Contains(cmd, "state=new") || strings.Count(cmd, "--initial-cluster=") != 1 {
		t.Errorf("command %q keeps the first boot's flags", cmd)
	}
	stored, aside, got := e.HasMember()
	if !stored || aside {
		t.Errorf("HasMember after the start: %v %v", stored, aside)
	}
	if got != 0x9a {
		t.Errorf("StoredLearner %x, want 9a", got)
	}
}

// The daemon's default --master-dead-after is the rule book's: the
// configuration package does not import masters, so the two constants
// are kept equal here.
func TestDefaultMasterDeadAfter(t *testing.T) {
	if config.DefaultMasterDeadAfter != masters.DeadAfter {
		t.Errorf("config.DefaultMasterDeadAfter %s, masters.DeadAfter %s", config.DefaultMasterDeadAfter, masters.DeadAfter)
	}
}

// TestEtcdMemberPrepared: a labelled worker's first member is made from a
// master's mirror pod, only once its member certificate is on its disk,
// kept aside, and started as the promotion's learner like a demoted
// master's; a node that holds a member prepares none.
func TestEtcdMemberPrepared(t *testing.T) {
	_, e := newEtcdPod(t)
	pki := t.TempDir()
	data := filepath.Join(t.TempDir(), "etcd")
	template := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-m1", Namespace: metav1.NamespaceSystem, Labels: map[string]string{"component": "etcd"},
		Annotations: map[string]string{v1.MirrorPodAnnotationKey: "h", btypes.AnnotationOwner: string(btypes.OwnerKubeletStatic)}},
		Spec: v1.PodSpec{NodeName: "m1", Containers: []v1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.8-0",
			Command: []string{"etcd", "--name=m1", "--data-dir=/var/lib/etcd", "--initial-cluster=m1=https://10.0.0.11:2380", "--initial-cluster-state=new",
				"--advertise-client-urls=https://10.0.0.11:2379", "--initial-advertise-peer-urls=https://10.0.0.11:2380", "--listen-peer-urls=https://10.0.0.11:2380",
				"--listen-client-urls=https://127.0.0.1:2379,https://10.0.0.11:2379", "--listen-metrics-urls=http://127.0.0.1:2381", "--trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt"},
			VolumeMounts: []v1.VolumeMount{{Name: "etcd-data", MountPath: "/var/lib/etcd"}, {Name: "etcd-certs", MountPath: "/etc/kubernetes/pki/etcd"}}}},
			Volumes: []v1.Volume{{Name: "etcd-data", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: data}}},
				{Name: "etcd-certs", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: pki}}}}}}
	ip := netip.MustParseAddr("10.0.0.21")
	if err := e.Prepare(template, "w1", ip); err == nil || !strings.Contains(err.Error(), "no member certificate") {
		t.Fatalf("Prepare without the member certificate = %v; want refused, naming it", err)
	}
	if _, aside, _ := e.HasMember(); aside {
		t.Fatal("a refused Prepare kept a pod aside")
	}
	writeMemberPair(t, pki, "w1")
	if err := e.Prepare(template, "w1", ip); err != nil {
		t.Fatal(err)
	}
	if stored, aside, _ := e.HasMember(); stored || !aside {
		t.Fatalf("HasMember after Prepare: stored %v, aside %v; want aside only", stored, aside)
	}
	if err := e.Prepare(template, "w1", ip); err == nil {
		t.Error("Prepare over a pod aside: no error")
	}
	if err := e.StartLearner("m1=https://10.0.0.11:2380,w1=https://10.0.0.21:2380", 0x5, time.Now()); err != nil {
		t.Fatal(err)
	}
	p, err := e.MemberPod()
	if err != nil || p == nil {
		t.Fatalf("no member after StartLearner: %v", err)
	}
	if p.Name != "etcd" || p.Annotations[btypes.AnnotationOwner] != "" {
		t.Errorf("stored pod %s with annotations %v; want etcd, none of the template's", p.Name, p.Annotations)
	}
	cmd := strings.Join(p.Spec.Containers[0].Command, " ")
	for _, want := range []string{"--name=w1", "--initial-advertise-peer-urls=https://10.0.0.21:2380", "--initial-cluster=m1=https://10.0.0.11:2380,w1=https://10.0.0.21:2380", "--initial-cluster-state=existing"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("command %q lacks %s", cmd, want)
		}
	}
	if err := e.Prepare(template, "w1", ip); err == nil {
		t.Error("Prepare over a stored member: no error")
	}
}

// writeMemberPair writes a member pair for cn and its CA into dir, as
// masters/nodekeys does.
func writeMemberPair(t *testing.T, dir, cn string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "etcd-ca"}, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := nodekeys.Write(dir, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), keyPEM); err != nil {
		t.Fatal(err)
	}
}
