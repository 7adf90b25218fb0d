package certificates

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/credmirror"
	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/podapi/apitls"
)

func TestDeploymentRolledOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    appsv1.Deployment
		done bool
		why  string
	}{
		{name: "spec not observed", d: appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)}}, why: "spec update to be observed"},
		{name: "updating", d: deploy(2, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2}), why: "1 out of 2 new replicas"},
		{name: "old pending", d: deploy(2, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 2, AvailableReplicas: 2}), why: "1 old replicas are pending termination"},
		{name: "not available", d: deploy(2, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 1}), why: "1 of 2 updated replicas are available"},
		{name: "deadline", d: deploy(2, appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Reason: "ProgressDeadlineExceeded"}}}), why: "exceeded its progress deadline"},
		{name: "done", d: deploy(2, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}), done: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.d.Name = "x"
			done, why := deploymentRolledOut(&tc.d)
			if done != tc.done || !strings.Contains(why, tc.why) {
				t.Errorf("got %v %q, want %v %q", done, why, tc.done, tc.why)
			}
		})
	}
}

func deploy(replicas int32, st appsv1.DeploymentStatus) appsv1.Deployment {
	d := appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}, Status: st}
	d.Generation, d.Status.ObservedGeneration = 3, 3
	return d
}

// TestRenewCertsOffline: certs renew apiserver bootlet-serving --offline
// renews those two and nothing else; --expiring-within with nothing
// expiring renews nothing; a CA is refused.
func TestRenewCertsOffline(t *testing.T) {
	assets, root := t.TempDir(), t.TempDir()
	cfg := manifests.DefaultConfig()
	cfg.NodeName, cfg.AdvertiseAddress = "node1", "10.0.0.1"
	if err := manifests.Render(cfg, assets); err != nil {
		t.Fatal(err)
	}
	if _, err := apitls.LoadOrCreatePKI(apitls.PKIOptions{Dir: filepath.Join(root, "pki"), NodeName: "node1", Hosts: []string{"127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	serial := func(path string) string {
		certs, err := certutil.CertsFromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return certs[0].SerialNumber.String()
	}
	files := []string{filepath.Join(assets, "pki", "apiserver.crt"), filepath.Join(root, "pki", "apiserver.crt"), filepath.Join(assets, "pki", "etcd", "server.crt")}
	var before []string
	for _, f := range files {
		before = append(before, serial(f))
	}
	o := RenewOptions{AssetDir: assets, RootDir: root, Offline: true}
	var out bytes.Buffer
	if err := Renew(t.Context(), o, []string{"apiserver", "bootlet-serving"}, &out, time.Now()); err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		if changed := serial(f) != before[i]; changed != (i < 2) {
			t.Errorf("%s renewed: %v, want %v\n%s", f, changed, i < 2, out.String())
		}
	}
	if !strings.Contains(out.String(), "renewed apiserver: serial") || !strings.Contains(out.String(), "renewed bootlet-serving") {
		t.Errorf("output:\n%s", out.String())
	}
	out.Reset()
	o.ExpiringWithin = time.Hour
	if err := Renew(t.Context(), o, nil, &out, time.Now()); err != nil || !strings.Contains(out.String(), "no certificate expires within 1h0m0s") {
		t.Errorf("--expiring-within 1h: %v\n%s", err, out.String())
	}
	if err := Renew(t.Context(), o, []string{"etcd/ca"}, &out, time.Now()); err == nil || !strings.Contains(err.Error(), "is a CA") {
		t.Errorf("renewing a CA: %v", err)
	}
}

// TestDaemonSetRolledOut: kubectl rollout status's verdicts on a DaemonSet
// (the controller-manager's and scheduler's with several masters).
func TestDaemonSetRolledOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   appsv1.DaemonSetStatus
		gen  int64
		why  string
		done bool
	}{
		{name: "spec not observed", gen: 4, st: appsv1.DaemonSetStatus{ObservedGeneration: 3}, why: "spec update to be observed"},
		{name: "updating", gen: 3, st: appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 1, NumberAvailable: 3}, why: "1 out of 3 new pods"},
		{name: "not available", gen: 3, st: appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 2}, why: "2 of 3 updated pods are available"},
		{name: "done", gen: 3, st: appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 3}, done: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}}, Status: tc.st}
			ds.Generation = tc.gen
			done, why := daemonSetRolledOut(ds)
			if done != tc.done || !strings.Contains(why, tc.why) {
				t.Errorf("done %v why %q, want %v %q", done, why, tc.done, tc.why)
			}
		})
	}
}

// TestRestartWorkload: the controller-manager is restarted as a Deployment
// with one master and as a DaemonSet with several; neither is NotFound.
func TestRestartWorkload(t *testing.T) {
	meta := metav1.ObjectMeta{Name: manifests.KubeControllerManager, Namespace: "kube-system"}
	for _, tc := range []struct {
		obj  runtime.Object
		kind string
	}{
		{&appsv1.Deployment{ObjectMeta: meta}, "deployment"},
		{&appsv1.DaemonSet{ObjectMeta: meta}, "daemon set"},
	} {
		c := fake.NewClientset(tc.obj)
		w, err := restartWorkload(context.Background(), c, manifests.KubeControllerManager)
		if err != nil || w.kind != tc.kind {
			t.Fatalf("%T: %+v %v", tc.obj, w, err)
		}
		var annotations map[string]string
		if tc.kind == "deployment" {
			d, _ := c.AppsV1().Deployments("kube-system").Get(context.Background(), meta.Name, metav1.GetOptions{})
			annotations = d.Spec.Template.Annotations
		} else {
			d, _ := c.AppsV1().DaemonSets("kube-system").Get(context.Background(), meta.Name, metav1.GetOptions{})
			annotations = d.Spec.Template.Annotations
		}
		if annotations[restartedAtAnnotation] == "" {
			t.Errorf("%s: not restarted: %v", tc.kind, annotations)
		}
	}
	if _, err := restartWorkload(context.Background(), fake.NewClientset(), manifests.KubeScheduler); !apierrors.IsNotFound(err) {
		t.Errorf("neither kind: err %v, want NotFound", err)
	}
}

// TestUpdateSecretThenWaitMirror: the Secret the update stored is the one
// whose mirror the renewal waits for, and the wait ends once the mirror
// holds the renewed files.
func TestUpdateSecretThenWaitMirror(t *testing.T) {
	ctx := t.Context()
	name := manifests.KubeScheduler
	target := credmirror.Target{Dir: filepath.Join(t.TempDir(), name), Items: []v1.KeyToPath{{Key: "scheduler.conf", Path: "scheduler.conf"}}}
	old := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem}, Data: map[string][]byte{"scheduler.conf": []byte("old")}}
	if err := credmirror.Annotate(old, target); err != nil {
		t.Fatal(err)
	}
	if _, err := credmirror.Mirror(old, target); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientset(old.DeepCopy())
	files := map[string][]byte{"scheduler.conf": []byte("new")}

	keys, updated, err := updateSecret(ctx, c, name, files)
	if err != nil || len(keys) != 1 || updated == nil || string(updated.Data["scheduler.conf"]) != "new" {
		t.Fatalf("updateSecret: keys %v, Secret %v, %v", keys, updated, err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if ok, err := waitMirror(short, updated, files, keys); !ok || err == nil || !strings.Contains(err.Error(), "still holds the old scheduler.conf") {
		t.Errorf("the mirror not yet renewed: %v %v", ok, err)
	}
	if _, err := credmirror.Mirror(updated, target); err != nil {
		t.Fatal(err)
	}
	if ok, err := waitMirror(ctx, updated, files, keys); !ok || err != nil {
		t.Errorf("the mirror renewed: %v %v", ok, err)
	}

	// Nothing to change: no update, no Secret to wait for.
	if keys, updated, err := updateSecret(ctx, c, name, files); err != nil || len(keys) != 0 || updated != nil {
		t.Errorf("updateSecret again: keys %v, Secret %v, %v", keys, updated, err)
	}
	// A Secret without a mirror target is nothing to wait for.
	if ok, err := waitMirror(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, files, keys); ok || err != nil {
		t.Errorf("no mirror target: %v %v", ok, err)
	}
}
