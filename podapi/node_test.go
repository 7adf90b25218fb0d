package podapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNode(t *testing.T) {
	s, _, _ := newTestServer(t)
	runtimeDown := errors.New("connection refused")
	s.AddReadyCheck("runtime", func() error { return runtimeDown })
	s.SetNodeStatus(func(n *v1.Node) {
		n.Annotations = map[string]string{"bootlet.dev/phase": "bootstrap"}
		n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: "BootletPhase", Status: v1.ConditionTrue, Reason: "Bootstrap"})
	})

	rec, _ := do(s, http.MethodGet, "/api/v1/nodes/node1", "", "")
	var n v1.Node
	if err := json.Unmarshal(rec.Body.Bytes(), &n); rec.Code != 200 || err != nil {
		t.Fatalf("get: %d %v %s", rec.Code, err, rec.Body)
	}
	if n.Kind != "Node" || n.APIVersion != "v1" || n.Name != "node1" || n.Labels[v1.LabelHostname] != "node1" || n.Annotations["bootlet.dev/phase"] != "bootstrap" {
		t.Fatalf("node: %+v", n)
	}
	if len(n.Status.Conditions) != 2 || n.Status.Conditions[0].Type != v1.NodeReady || n.Status.Conditions[0].Status != v1.ConditionFalse ||
		n.Status.Conditions[0].Message != "recovery: recovery in progress; runtime: connection refused" || n.Status.Conditions[1].Reason != "Bootstrap" {
		t.Fatalf("conditions: %+v", n.Status.Conditions)
	}

	s.SetReady()
	runtimeDown = nil
	rec, _ = do(s, http.MethodGet, "/api/v1/nodes", "", "")
	var l v1.NodeList
	if err := json.Unmarshal(rec.Body.Bytes(), &l); rec.Code != 200 || err != nil || l.Kind != "NodeList" || len(l.Items) != 1 {
		t.Fatalf("list: %d %v %s", rec.Code, err, rec.Body)
	}
	if c := l.Items[0].Status.Conditions[0]; c.Status != v1.ConditionTrue || c.Reason != "BootletReady" {
		t.Fatalf("ready: %+v", c)
	}
	for _, q := range []string{"labelSelector=kubernetes.io/hostname%3Dother", "fieldSelector=metadata.name%3Dother"} {
		rec, _ = do(s, http.MethodGet, "/api/v1/nodes?"+q, "", "")
		l = v1.NodeList{}
		if err := json.Unmarshal(rec.Body.Bytes(), &l); rec.Code != 200 || err != nil || len(l.Items) != 0 {
			t.Fatalf("%s: %d %s", q, rec.Code, rec.Body)
		}
	}

	for _, c := range []struct {
		method, path string
		code         int
		reason       metav1.StatusReason
	}{
		{"GET", "/api/v1/nodes/other", 404, metav1.StatusReasonNotFound},
		{"GET", "/api/v1/nodes/node1/status", 404, metav1.StatusReasonNotFound},
		{"DELETE", "/api/v1/nodes/node1", 405, metav1.StatusReasonMethodNotAllowed},
		{"PATCH", "/api/v1/nodes/node1", 405, metav1.StatusReasonMethodNotAllowed},
		{"GET", "/api/v1/nodes?watch=true", 405, metav1.StatusReasonMethodNotAllowed},
		{"GET", "/api/v1/namespaces/default/nodes", 404, metav1.StatusReasonNotFound},
	} {
		rec, st := do(s, c.method, c.path, "application/merge-patch+json", "{}")
		if rec.Code != c.code || st.Kind != "Status" || st.Reason != c.reason {
			t.Errorf("%s %s: %d %+v", c.method, c.path, rec.Code, st)
		}
	}

	// kubectl get nodes: the apiserver's printer shows the Ready condition.
	req := httptest.NewRequest(http.MethodGet, "/api/v1/nodes", nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	w := httptest.NewRecorder()
	asAdmin(s).ServeHTTP(w, req)
	var table metav1.Table
	if err := json.Unmarshal(w.Body.Bytes(), &table); err != nil || table.Kind != "Table" || len(table.Rows) != 1 || table.Rows[0].Cells[1] != "Ready" {
		t.Fatalf("table: %v %s", err, w.Body)
	}

	// Discovery lists nodes (get, list), and a reader may read them.
	var rl metav1.APIResourceList
	rec, _ = do(s, http.MethodGet, "/api/v1", "", "")
	_ = json.Unmarshal(rec.Body.Bytes(), &rl)
	found := false
	for _, r := range rl.APIResources {
		if r.Name == "nodes" {
			found = !r.Namespaced && r.Kind == "Node" && len(r.Verbs) == 2
		}
	}
	if !found {
		t.Fatalf("discovery: %s", rec.Body)
	}
	if rec, _ := doAs(as(s, "ro", "bootlet:readers"), "GET", "/api/v1/nodes/node1", "", ""); rec.Code != 200 {
		t.Fatalf("reader: %d %s", rec.Code, rec.Body)
	}
}
