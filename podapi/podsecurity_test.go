package podapi

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootlet/bootlet/podapi/authz"
)

const privilegedRootPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"evil"},"spec":{
 "containers":[{"name":"x","image":"busybox","securityContext":{"privileged":true},
  "volumeMounts":[{"name":"root","mountPath":"/host"}]}],
 "volumes":[{"name":"root","hostPath":{"path":"/"}}]}}`

// TestPodSecurityAdmission: with --pod-security-level=baseline, an admin
// outside the exempt groups cannot create a privileged pod that mounts /
// (POST, dry run or server-side apply): a 403 worded as the apiserver's
// PodSecurity admission, nothing stored. The exempt group can; a pod that
// meets the level passes; with the level unset nothing is checked.
func TestPodSecurityAdmission(t *testing.T) {
	s, _, store := newTestServer(t)
	s.SetAuthz(authz.Config{AdminGroups: []string{"system:masters", "provisioners"}, ReaderGroups: []string{authz.DefaultReaderGroup}})
	if err := s.SetPodSecurity("baseline", DefaultPodSecurityExemptGroups); err != nil {
		t.Fatal(err)
	}
	writer := as(s, "provisioner", "provisioners")
	const (
		postPath  = "/api/v1/namespaces/default/pods"
		applyPath = "/api/v1/namespaces/default/pods/evil?fieldManager=t"
	)
	tests := []struct {
		name         string
		method, path string
		ct           string
	}{
		{"create", http.MethodPost, postPath, "application/json"},
		{"dry-run create", http.MethodPost, postPath + "?dryRun=All", "application/json"},
		{"server-side apply", http.MethodPatch, applyPath, "application/apply-patch+yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec, st := doAs(writer, tc.method, tc.path, tc.ct, privilegedRootPod)
			if rec.Code != http.StatusForbidden || st.Reason != metav1.StatusReasonForbidden {
				t.Fatalf("want 403 Forbidden, got %d %s", rec.Code, rec.Body)
			}
			for _, want := range []string{`pods "evil" is forbidden: violates PodSecurity "baseline:latest"`,
				`privileged (container "x" must not set securityContext.privileged=true)`, `hostPath volumes (volume "root")`} {
				if !strings.Contains(st.Message, want) {
					t.Errorf("message %q lacks %q", st.Message, want)
				}
			}
			if n := len(store.List("pods")); n != 0 {
				t.Fatalf("a refused pod was stored (%d pods)", n)
			}
		})
	}

	if rec, _ := doAs(writer, http.MethodPost, postPath, "application/json", goodPod); rec.Code != http.StatusCreated {
		t.Fatalf("a baseline pod by a non-exempt admin: %d %s", rec.Code, rec.Body)
	}
	// Without privileged: the unit test process does not allow privileged
	// containers at all (validation), the daemon does.
	hostRootPod := strings.Replace(privilegedRootPod, `"securityContext":{"privileged":true},`, "", 1)
	if rec, _ := do(s, http.MethodPost, postPath, "application/json", strings.Replace(hostRootPod, `"evil"`, `"cp"`, 1)); rec.Code != http.StatusCreated {
		t.Fatalf("the exempt group (system:masters): %d %s", rec.Code, rec.Body)
	}

	if err := s.SetPodSecurity("", nil); err != nil {
		t.Fatal(err)
	}
	if rec, _ := doAs(writer, http.MethodPost, postPath, "application/json", hostRootPod); rec.Code != http.StatusCreated {
		t.Fatalf("with the policy off: %d %s", rec.Code, rec.Body)
	}
	if err := s.SetPodSecurity("lax", nil); err == nil {
		t.Fatal("an unknown level was accepted")
	}
}
