//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/csrapprover"
	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/masters"
	masterscontroller "github.com/bootlet/bootlet/masters/controller"
	"github.com/bootlet/bootlet/masters/signer"
	btypes "github.com/bootlet/bootlet/types"
	upgradecontroller "github.com/bootlet/bootlet/upgrade/controller"
)

// startCSRApprover runs bootlet's approver of bootstrap node client
// requests (what every master's daemon runs) against the test's
// apiserver, with render's checkpointer identity and its RBAC, until the
// test ends. Without it no bootstrap request is approved: render grants
// the token's group no auto-approval.
func startCSRApprover(t *testing.T, admin *kubernetes.Clientset, assets string) {
	t.Helper()
	createCheckpointerRBAC(t, admin, assets)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		csrapprover.New(csrapprover.Config{
			Kubeconfig:     filepath.Join(assets, manifests.CheckpointerKubeconfig),
			BootstrapGroup: manifests.NodeBootstrapTokenGroup,
			Resync:         2 * time.Second,
		}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// startEtcdMemberSigner runs the masters' leader's signer of etcd member
// certificates (package masters/signer, the pivot's identity on a master:
// render's admin.conf) with render's etcd CA, until the test ends.
func startEtcdMemberSigner(t *testing.T, admin *kubernetes.Clientset, assets string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	etcdCA := filepath.Join(assets, manifests.PKIDir, "etcd")
	go func() {
		defer close(done)
		signer.New(signer.Config{Resync: 2 * time.Second, EtcdCA: func() (string, string, error) {
			return filepath.Join(etcdCA, "ca.crt"), filepath.Join(etcdCA, "ca.key"), nil
		}}).Lead(ctx, admin, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// etcdMemberRequest posts, as cs, a request for node name's etcd member
// certificate naming addr, and waits for its verdict.
func etcdMemberRequest(t *testing.T, cs, admin kubernetes.Interface, name string, addr netip.Addr) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	return requestAs(t, cs, admin, signer.SignerName, "etcd-member-"+name+"-", signer.Template(name, []netip.Addr{addr}),
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth}, nil)
}

// identityRequest posts, as cs, a request for the checkpointer identity
// (tmpl: signer.IdentityTemplate, or a changed one) for life (nil: none
// asked), and returns it once it is denied or issued, as admin reads it.
func identityRequest(t *testing.T, cs, admin kubernetes.Interface, tmpl *x509.CertificateRequest, life *int32) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	return requestAs(t, cs, admin, signer.IdentitySignerName, "bootlet-checkpointer-", tmpl,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}, life)
}

// requestAs posts, as cs, a request of signerName for tmpl with a new
// key, for life seconds (nil: none asked), and returns it once it has a
// verdict other than a bare approval (denied, failed, or its certificate
// issued), as admin reads it.
func requestAs(t *testing.T, cs, admin kubernetes.Interface, signerName, generateName string, tmpl *x509.CertificateRequest, usages []certificatesv1.KeyUsage, life *int32) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	ctx := context.Background()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cs.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: generateName},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: signerName, Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), Usages: usages,
			ExpirationSeconds: life},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("posting a request of %s for %q: %v", signerName, tmpl.Subject.CommonName, err)
	}
	Eventually(t, time.Minute, func() (bool, string) {
		if r, err = admin.CertificatesV1().CertificateSigningRequests().Get(ctx, r.Name, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		return len(r.Status.Certificate) > 0 || len(r.Status.Conditions) > 0 && r.Status.Conditions[len(r.Status.Conditions)-1].Type != certificatesv1.CertificateApproved,
			fmt.Sprintf("request %s has no verdict: %+v", r.Name, r.Status.Conditions)
	})
	return r
}

// nodeClientRequest posts a kubelet client request for system:node:NAME
// as cs and returns its name and UID.
func nodeClientRequest(t *testing.T, cs kubernetes.Interface, name string) (string, types.UID) {
	t.Helper()
	n, err := postNodeClientRequest(cs, name)
	if err != nil {
		t.Fatalf("posting a node client request for %s: %v", name, err)
	}
	return n, ""
}

// postNodeClientRequest creates the request and returns its name.
func postNodeClientRequest(cs kubernetes.Interface, name string) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		return "", err
	}
	pemReq := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	r := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: pemReq, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}},
	}
	created, err := cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(), r, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return created.Name, nil
}

// requireDenied waits for the request's verdict: denied with reason, and
// no certificate.
func requireDenied(t *testing.T, admin kubernetes.Interface, name, reason string) {
	t.Helper()
	Eventually(t, 30*time.Second, func() (bool, string) {
		r, err := admin.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range r.Status.Conditions {
			if c.Type == certificatesv1.CertificateApproved {
				t.Fatalf("request %s was approved (%s: %s)", name, c.Reason, c.Message)
			}
			if c.Type == certificatesv1.CertificateDenied {
				if c.Reason != reason || len(r.Status.Certificate) != 0 {
					t.Fatalf("request %s denied with %s (%s), certificate %d bytes; want %s and none", name, c.Reason, c.Message, len(r.Status.Certificate), reason)
				}
				t.Logf("request %s denied: %s: %s", name, c.Reason, c.Message)
				return true, ""
			}
		}
		return false, fmt.Sprintf("request %s has no verdict: %+v", name, r.Status.Conditions)
	})
}

// testTokenCannotTakeANode: a bootstrap token, and a worker's own kubelet
// credentials, try to become the master or another node, to promote the
// worker, and to read the control plane's keys. Every attempt fails.
func testTokenCannotTakeANode(t *testing.T, admin, token, worker *kubernetes.Clientset, masterName, workerName string) {
	ctx := context.Background()
	// The master's Node, as its kubelet registers it.
	if _, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: masterName,
		Labels: map[string]string{btypes.LabelControlPlane: ""}}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Run("token asks for the master's name", func(t *testing.T) {
		name, _ := nodeClientRequest(t, token, masterName)
		requireDenied(t, admin, name, csrapprover.ReasonNodeExists)
	})
	t.Run("token asks for the worker's name again", func(t *testing.T) {
		name, _ := nodeClientRequest(t, token, workerName)
		reason := csrapprover.ReasonNodeNameClaimed
		if _, err := admin.CoreV1().Nodes().Get(ctx, workerName, metav1.GetOptions{}); err == nil {
			reason = csrapprover.ReasonNodeExists
		}
		requireDenied(t, admin, name, reason)
	})
	t.Run("worker asks for the master's name", func(t *testing.T) {
		name, err := postNodeClientRequest(worker, masterName)
		if apierrors.IsForbidden(err) {
			// NodeRestriction: a node may only ask for its own name.
			t.Logf("the worker's request for %s is refused at creation: %v", masterName, err)
			return
		}
		if err != nil {
			t.Fatalf("posting the worker's request for %s: %v", masterName, err)
		}
		// Nobody approves it: the controller-manager's selfnodeclient
		// approval needs the requester's own name, and bootlet's approver
		// decides only bootstrap tokens' requests.
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			r, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range r.Status.Conditions {
				if c.Type == certificatesv1.CertificateApproved || len(r.Status.Certificate) > 0 {
					t.Fatalf("the worker's request for %s was approved: %+v", masterName, r.Status.Conditions)
				}
			}
			time.Sleep(time.Second)
		}
	})
	t.Run("worker reads the control plane's keys", func(t *testing.T) {
		for _, s := range []string{manifests.KubeControllerManager, manifests.KubeAPIServer, manifests.KubeScheduler} {
			if _, err := worker.CoreV1().Secrets("kube-system").Get(ctx, s, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("the worker's credentials read kube-system/%s: %v, want forbidden", s, err)
			}
		}
		if _, err := worker.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the worker's credentials list kube-system's Secrets: %v, want forbidden", err)
		}
	})
	t.Run("worker reads or writes what a promotion uses", func(t *testing.T) {
		// The masters' controller's record, as the leader writes it, and
		// the Lease that elects that leader: a node that could rewrite the
		// record, or lead, could have a member added or removed.
		record := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: masterscontroller.RecordName, Namespace: metav1.NamespaceSystem},
			Data: map[string]string{masterscontroller.RecordKey: `{"masters":["` + masterName + `"]}`}}
		if _, err := admin.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, record, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		cms := worker.CoreV1().ConfigMaps(metav1.NamespaceSystem)
		if _, err := cms.Get(ctx, masterscontroller.RecordName, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the worker's credentials read the masters' record: %v, want forbidden", err)
		}
		forged := record.DeepCopy()
		forged.Data[masterscontroller.RecordKey] = `{"masters":["` + masterName + `","` + workerName + `"]}`
		if _, err := cms.Update(ctx, forged, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the worker's credentials rewrote the masters' record: %v, want forbidden", err)
		}
		if err := cms.Delete(ctx, masterscontroller.RecordName, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the worker's credentials deleted the masters' record: %v, want forbidden", err)
		}
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: upgradecontroller.LeaseName, Namespace: metav1.NamespaceSystem},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &workerName}}
		if _, err := worker.CoordinationV1().Leases(metav1.NamespaceSystem).Create(ctx, lease, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the worker's credentials created the controllers' Lease: %v, want forbidden", err)
		}
		if _, err := worker.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, upgradecontroller.LeaseName, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the worker's credentials read the controllers' Lease: %v, want forbidden", err)
		}
	})
	t.Run("worker promotes itself", func(t *testing.T) {
		// A kubelet may create its own Node, but NodeRestriction forbids
		// it the node-role labels, at creation and at every update.
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: workerName, Labels: map[string]string{btypes.LabelControlPlane: ""}}}
		if _, err := worker.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the worker registered itself with %s: %v, want forbidden", btypes.LabelControlPlane, err)
		}
		n.Labels = nil
		if _, err := worker.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("the worker cannot register its Node: %v", err)
		}
		patch := []byte(`{"metadata":{"labels":{"` + btypes.LabelControlPlane + `":""}}}`)
		if _, err := worker.CoreV1().Nodes().Patch(ctx, workerName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the worker labelled its Node %s: %v, want forbidden", btypes.LabelControlPlane, err)
		}
		// Nor may it claim it can lead the masters' controller: the
		// rule book would then let the last master that can lead be demoted.
		patch = []byte(`{"metadata":{"labels":{"` + masters.LabelLeader + `":""}}}`)
		if _, err := worker.CoreV1().Nodes().Patch(ctx, workerName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the worker labelled its Node %s: %v, want forbidden", masters.LabelLeader, err)
		}
		if _, err := worker.CoreV1().Nodes().Patch(ctx, masterName, types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("the worker patched the master's Node: %v, want forbidden", err)
		}
	})
	t.Run("worker asks for an etcd member certificate", func(t *testing.T) {
		// The worker's Node is registered (the subtest above) and not
		// labelled: its own request is denied, as is one in the
		// master's name; once an administrator labels it, its own is
		// issued.
		addr := netip.MustParseAddr("127.0.0.1")
		if r := etcdMemberRequest(t, worker, admin, workerName, addr); !deniedFor(r, "NotAMaster") {
			t.Errorf("the unlabelled worker's request for its etcd member certificate: %+v, want denied NotAMaster", r.Status.Conditions)
		}
		if r := etcdMemberRequest(t, worker, admin, masterName, addr); !deniedFor(r, "Subject") {
			t.Errorf("the worker's request for the master's etcd member certificate: %+v, want denied Subject", r.Status.Conditions)
		}
		setMasterLabel(t, admin, workerName, true)
		defer setMasterLabel(t, admin, workerName, false)
		// The registered Node reports no address: its request names none
		// of its addresses, and is denied for that, after the label.
		if r := etcdMemberRequest(t, worker, admin, workerName, addr); !deniedFor(r, "SubjectAltNames") {
			t.Errorf("the labelled worker's request naming an address its Node does not report: %+v, want denied SubjectAltNames", r.Status.Conditions)
		}
		status := []byte(`{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.1"}]}}`)
		if _, err := worker.CoreV1().Nodes().Patch(ctx, workerName, types.StrategicMergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("the worker reporting its address: %v", err)
		}
		r := etcdMemberRequest(t, worker, admin, workerName, addr)
		if len(r.Status.Certificate) == 0 {
			t.Fatalf("the labelled worker's request for its etcd member certificate: %+v, want issued", r.Status.Conditions)
		}
		t.Logf("labelled, the worker's own request is issued: %d bytes", len(r.Status.Certificate))
	})
	t.Run("worker asks for the checkpointer identity", func(t *testing.T) {
		// The identity of a master's bootlet, which reads kube-system's
		// Secrets: denied to an unlabelled node, and to a labelled one
		// that adds a group (the apiserver itself refuses this signer
		// O=system:masters at creation; any other group is a grant the
		// identity must not carry); issued by the controller-manager
		// once the leader approves a labelled node's own.
		month := ptr.To(int32(signer.MaxIdentityLife / time.Second))
		if r := identityRequest(t, worker, admin, signer.IdentityTemplate(), month); !deniedFor(r, "NotAMaster") {
			t.Errorf("the unlabelled worker's request for the checkpointer identity: %+v, want denied NotAMaster", r.Status.Conditions)
		}
		setMasterLabel(t, admin, workerName, true)
		defer setMasterLabel(t, admin, workerName, false)
		grouped := signer.IdentityTemplate()
		grouped.Subject.Organization = []string{"system:nodes"}
		if r := identityRequest(t, worker, admin, grouped, month); !deniedFor(r, "Subject") {
			t.Errorf("the labelled worker's request for the checkpointer identity in a group: %+v, want denied Subject", r.Status.Conditions)
		}
		// Without a life asked the controller-manager would sign for its
		// default year.
		if r := identityRequest(t, worker, admin, signer.IdentityTemplate(), nil); !deniedFor(r, "Expiration") {
			t.Errorf("the labelled worker's request for the checkpointer identity without expirationSeconds: %+v, want denied Expiration", r.Status.Conditions)
		}
		r := identityRequest(t, worker, admin, signer.IdentityTemplate(), month)
		if !approvedBy(r, "CheckpointerOfMaster") || len(r.Status.Certificate) == 0 {
			t.Fatalf("the labelled worker's request for the checkpointer identity: %+v, want approved CheckpointerOfMaster and issued", r.Status.Conditions)
		}
		certs, err := certutil.ParseCertsPEM(r.Status.Certificate)
		if err != nil || certs[0].Subject.CommonName != manifests.CheckpointerUser || len(certs[0].Subject.Organization) > 0 {
			t.Fatalf("the issued identity: %v, %v; want %s alone", certs, err, manifests.CheckpointerUser)
		}
		t.Logf("labelled, the worker's request for the checkpointer identity is issued: %s until %s", certs[0].Subject.CommonName, certs[0].NotAfter.Format(time.DateOnly))
	})
}

// deniedFor: r is denied with reason.
func deniedFor(r *certificatesv1.CertificateSigningRequest, reason string) bool {
	for _, c := range r.Status.Conditions {
		if c.Type == certificatesv1.CertificateDenied && c.Reason == reason {
			return len(r.Status.Certificate) == 0
		}
	}
	return false
}
