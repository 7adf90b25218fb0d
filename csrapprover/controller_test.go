package csrapprover

import (
	"context"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestControllerWritesVerdicts runs the controller against a fake
// clientset: the new worker is approved, the master's name denied, and the
// renewal left alone.
func TestControllerWritesVerdicts(t *testing.T) {
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	req := func(name, user, cn string, groups ...string) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: user, Groups: groups,
				Usages: usages, Request: csrPEM(t, cn, []string{"system:nodes"}, nil),
			},
		}
	}
	cs := fake.NewClientset(
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-1"}},
		req("new", "system:bootstrap:a", "system:node:worker-1", group),
		req("steal", "system:bootstrap:a", "system:node:master-1", group),
		req("renew", "system:node:master-1", "system:node:master-1", "system:nodes"),
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		New(Config{Client: cs, BootstrapGroup: group, Resync: 50 * time.Millisecond}).Run(ctx)
	}()

	want := map[string]certificatesv1.RequestConditionType{"new": certificatesv1.CertificateApproved, "steal": certificatesv1.CertificateDenied}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := map[string]certificatesv1.RequestConditionType{}
		for _, n := range []string{"new", "steal", "renew"} {
			r, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range r.Status.Conditions {
				got[n] = c.Type
			}
		}
		if got["new"] == want["new"] && got["steal"] == want["steal"] {
			if c, ok := got["renew"]; ok {
				t.Fatalf("the renewal got a verdict: %s", c)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("verdicts %v, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}
