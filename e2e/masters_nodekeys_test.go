//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/e2e/nodes"
	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/masters"
	"github.com/bootlet/bootlet/masters/nodekeys"
	"github.com/bootlet/bootlet/masters/signer"
	btypes "github.com/bootlet/bootlet/types"
)

// checkWorkerNodeKeys labels a worker a master and checks the node's
// side of its credentials as a master. Its etcd member certificate: the
// worker's agent (bootlet upgrade agent, package masters/nodekeys) asks
// with its own kubelet identity, the masters' leader issues, and the pair
// lands on the worker's disk where a member's pod reads it, verifying
// against the master's etcd CA for the worker's address, with that CA
// beside it. Its checkpointer identity (checkWorkerIdentity). Its daemon
// then makes the member's pod and the masters' controller promotes it
// (learner, voter, control plane), under the strict probe clients. The
// label is then taken away: the controller demotes it, and the worker
// keeps both.
func checkWorkerNodeKeys(t testing.TB, admin *kubernetes.Clientset, master, worker nodes.Member) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(worker.Node().Root, "etc/kubernetes/pki/etcd")
	if _, err := os.Stat(filepath.Join(dir, "server.crt")); err == nil {
		t.Fatalf("%s has an etcd member certificate before it is labelled", worker.Name)
	}
	// The API address stays on the master throughout (one master holds
	// it alone): no request may fail.
	keep := StartProber(t, "api-keepalive", nodes.AdminConf, true)
	fresh := StartProber(t, "api-new-connection", nodes.AdminConf, false)
	t0 := time.Now()
	setMasterLabel(t, admin, worker.Name, true)
	var pair tls.Certificate
	Eventually(t, 3*time.Minute, func() (bool, string) {
		var err error
		pair, err = tls.LoadX509KeyPair(filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"))
		return err == nil, fmt.Sprintf("%s's member pair: %v", worker.Name, err)
	})
	took := time.Since(t0)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	masterCA, err := os.ReadFile(filepath.Join(master.Node().Root, "etc/kubernetes/pki/etcd/ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	besideCA, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if mb, _ := pem.Decode(masterCA); mb == nil || !bytes.Contains(besideCA, pem.EncodeToMemory(mb)) {
		t.Errorf("%s's ca.crt is not the master's etcd CA:\n%s", worker.Name, besideCA)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(masterCA)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: worker.Addr().String(), KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("%s's member certificate does not verify against the master's etcd CA for %s, usage %v: %v", worker.Name, worker.Addr(), usage, err)
		}
	}
	if peer, err := os.ReadFile(filepath.Join(dir, "peer.crt")); err != nil || !bytes.Equal(peer, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})) {
		t.Errorf("%s's peer.crt is not its member certificate: %v", worker.Name, err)
	}
	for _, key := range []string{"server.key", "peer.key"} {
		if fi, err := os.Stat(filepath.Join(dir, key)); err != nil {
			t.Error(err)
		} else if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s's %s: mode %v, want 0600", worker.Name, key, fi.Mode())
		}
	}
	t.Logf("%s labelled: its agent's member certificate on its disk %s later (CN %s, IPs %v, until %s), verifying against the master's etcd CA",
		worker.Name, took.Round(time.Millisecond), leaf.Subject.CommonName, leaf.IPAddresses, leaf.NotAfter.Format(time.DateOnly))

	// The request was the worker's own, issued by the leader's signer.
	csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, r := range csrs.Items {
		if r.Spec.SignerName != signer.SignerName || r.Spec.Username != "system:node:"+worker.Name {
			continue
		}
		mine = append(mine, r.Name)
		if !approvedBy(&r, "EtcdMemberOfMaster") || len(r.Status.Certificate) == 0 {
			t.Errorf("request %s of %s: %+v, want approved EtcdMemberOfMaster and issued", r.Name, r.Spec.Username, r.Status.Conditions)
		}
	}
	// One request is the rule; a second only if the first's wait was
	// cut (each is checked above as issued).
	switch {
	case len(mine) == 0:
		t.Errorf("%s posted no request of %s", worker.Name, signer.SignerName)
	case len(mine) > 1:
		t.Logf("%s posted %d requests of %s: %v", worker.Name, len(mine), signer.SignerName, mine)
	}

	checkWorkerIdentity(t, admin, master, worker, t0)

	// The promotion: the worker's daemon, now holding the checkpointer
	// identity, makes its member's pod from the master's and says it can
	// host a member; the controller adds the learner, the daemon starts
	// it, the controller makes it a voter and moves the control plane's
	// placement label there.
	promoted := time.Now()
	awaitPromoted(t, admin, worker.Name)
	t.Logf("%s promoted %s after its label (%s after its credentials): its member a learner, then a voter, then its control plane",
		worker.Name, time.Since(t0).Round(time.Millisecond), time.Since(promoted).Round(time.Millisecond))
	checkEtcdMembers(t, []nodes.Member{master, worker})
	// The apiserver's DaemonSet follows the placement label; with two
	// masters the controller-manager's and scheduler's Deployments
	// become DaemonSets that follow it too (masters.DecideWorkload).
	checkComponentsOn(t, admin, []string{master.Name, worker.Name}, manifests.KubeAPIServer)

	// Unlabelled again: demoted in the safe order, the member removed and
	// its data set aside.
	demoted := time.Now()
	setMasterLabel(t, admin, worker.Name, false)
	awaitDemoted(t, admin, worker.Name)
	t.Logf("%s demoted in %s", worker.Name, time.Since(demoted).Round(time.Millisecond))
	checkEtcdMembers(t, []nodes.Member{master})
	checkComponentsOn(t, admin, []string{master.Name}, manifests.KubeAPIServer)
	if aside, _ := filepath.Glob(filepath.Join(worker.Node().Root, "var/lib/etcd.removed-*")); len(aside) != 1 {
		t.Errorf("%s's etcd data set aside: %v; want one directory", worker.Name, aside)
	}
	stopStrictProbes(t, "across "+worker.Name+"'s promotion and demotion", keep, fresh)
	if _, err := os.Stat(filepath.Join(dir, "server.key")); err != nil {
		t.Errorf("%s's member key after the label went: %v; want it kept", worker.Name, err)
	}
	if _, err := os.Stat(filepath.Join(worker.Node().Root, nodekeys.DefaultIdentityKubeconfig)); err != nil {
		t.Errorf("%s's checkpointer identity after the label went: %v; want it kept (it lapses with its month)", worker.Name, err)
	}
	t.Logf("%s unlabelled: its member pair and identity kept", worker.Name)
}

// checkWorkerIdentity: the labelled worker's agent holds the checkpointer
// identity (the one a master's bootlet reads the control plane's Secrets
// with) in a kubeconfig beside the kubelet's: the apiserver authenticates
// it as types.CheckpointerUser, it reads the apiserver's credential
// Secret, and it came from the worker's own request, approved by the
// masters' leader and signed by the controller-manager. It changes no
// Node's labels (render's node guard policy): not its own Node's to a
// leader, not the master's.
func checkWorkerIdentity(t testing.TB, admin *kubernetes.Clientset, master, worker nodes.Member, labelled time.Time) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(worker.Node().Root, nodekeys.DefaultIdentityKubeconfig)
	Eventually(t, 3*time.Minute, func() (bool, string) {
		cert, err := nodekeys.ReadIdentity(path)
		return cert != nil, fmt.Sprintf("%s's checkpointer identity: %v", worker.Name, err)
	})
	took := time.Since(labelled)
	cs := clientFor(t, path)
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview with %s's checkpointer identity: %v", worker.Name, err)
	}
	if u := r.Status.UserInfo; u.Username != btypes.CheckpointerUser || slices.Contains(u.Groups, "system:masters") {
		t.Errorf("%s's checkpointer identity authenticates as %q in %v; want %s, not in system:masters", worker.Name, u.Username, u.Groups, btypes.CheckpointerUser)
	}
	if _, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, manifests.KubeAPIServer, metav1.GetOptions{}); err != nil {
		t.Errorf("%s's checkpointer identity cannot read the apiserver's credential Secret, as a master's bootlet must: %v", worker.Name, err)
	}
	csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, r := range csrs.Items {
		if r.Spec.SignerName == signer.IdentitySignerName && r.Spec.Username == "system:node:"+worker.Name {
			mine = append(mine, r.Name)
			if !approvedBy(&r, "CheckpointerOfMaster") || len(r.Status.Certificate) == 0 {
				t.Errorf("request %s of %s: %+v; want approved CheckpointerOfMaster and issued", r.Name, r.Spec.Username, r.Status.Conditions)
			}
		}
	}
	if len(mine) == 0 {
		t.Errorf("%s posted no request of %s", worker.Name, signer.IdentitySignerName)
	}
	checkIdentityLabelsNoNode(t, admin, cs, worker.Name, master.Name)
	t.Logf("%s labelled: its checkpointer identity on its disk %s later (%d request(s)), authenticating as %s", worker.Name, took.Round(time.Millisecond), len(mine), btypes.CheckpointerUser)
}

// checkIdentityLabelsNoNode: the checkpointer identity a promoted worker
// holds is refused any change of a Node's labels (its own Node made a
// leader, another node given a label) with the node guard policy's
// message, and the label stays as it was; an annotation of its own Node, which its
// masters' agent writes, is allowed.
func checkIdentityLabelsNoNode(t testing.TB, admin, identity kubernetes.Interface, own, other string) {
	t.Helper()
	ctx := context.Background()
	for _, try := range []struct{ node, label string }{{own, masters.LabelLeader}, {other, "example.com/set-by-a-worker"}} {
		before, err := admin.CoreV1().Nodes().Get(ctx, try.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:""}}}`, try.label)
		_, refused := identity.CoreV1().Nodes().Patch(ctx, try.node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if !apierrors.IsForbidden(refused) || !strings.Contains(refused.Error(), manifests.NodeGuardPolicyMessage) {
			t.Errorf("%s's checkpointer identity labelling %s %s: %v; want Forbidden by the node guard policy", own, try.node, try.label, refused)
		}
		after, err := admin.CoreV1().Nodes().Get(ctx, try.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		was, had := before.Labels[try.label]
		if is, has := after.Labels[try.label]; is != was || has != had {
			t.Errorf("%s's label %s was %q (%v), is %q (%v) after the identity's refused patch", try.node, try.label, was, had, is, has)
			if has && !had {
				// A forged leader label would skew what follows.
				undo := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, try.label)
				if _, err := admin.CoreV1().Nodes().Patch(ctx, try.node, types.MergePatchType, []byte(undo), metav1.PatchOptions{}); err != nil {
					t.Errorf("removing the label %s from %s: %v", try.label, try.node, err)
				}
			}
		}
		t.Logf("%s's checkpointer identity labelling %s %s: refused (%v)", own, try.node, try.label, refused)
	}
	patch := `{"metadata":{"annotations":{"e2e.bootlet.dev/identity-may-annotate":"yes"}}}`
	if _, err := identity.CoreV1().Nodes().Patch(ctx, own, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Errorf("%s's checkpointer identity annotating its own Node, as its masters' agent does: %v", own, err)
	}
}
