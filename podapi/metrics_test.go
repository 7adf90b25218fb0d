package podapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestRequestLabels(t *testing.T) {
	tests := []struct {
		method, ct          string
		rt                  route
		watch               bool
		verb, resource, sub string
	}{
		{method: "GET", rt: route{resource: "pods"}, verb: "LIST", resource: "pods", sub: ""},
		{method: "GET", rt: route{resource: "pods"}, watch: true, verb: "WATCH", resource: "pods", sub: ""},
		{method: "GET", rt: route{resource: "pods", name: "p"}, verb: "GET", resource: "pods", sub: ""},
		{method: "GET", rt: route{resource: "pods", name: "p", sub: "log"}, verb: "GET", resource: "pods", sub: "log"},
		{method: "GET", rt: route{resource: "pods", name: "p", sub: "status"}, verb: "GET", resource: "pods", sub: "status"},
		{method: "POST", rt: route{resource: "secrets"}, verb: "CREATE", resource: "secrets", sub: ""},
		{method: "PUT", rt: route{resource: "configmaps", name: "c"}, verb: "UPDATE", resource: "configmaps", sub: ""},
		{method: "PATCH", ct: "application/apply-patch+yaml", rt: route{resource: "pods", name: "p"}, verb: "APPLY", resource: "pods", sub: ""},
		{method: "PATCH", ct: "application/merge-patch+json", rt: route{resource: "pods", name: "p"}, verb: "PATCH", resource: "pods", sub: ""},
		{method: "DELETE", rt: route{resource: "pods", name: "p"}, verb: "DELETE", resource: "pods", sub: ""},
		{method: "GET", rt: route{resource: "namespaces"}, verb: "LIST", resource: "namespaces", sub: ""},
		// What the request names but the API does not serve is "other".
		{method: "GET", rt: route{resource: "deployments-x1"}, verb: "LIST", resource: "other", sub: ""},
		{method: "GET", rt: route{resource: "pods", name: "p", sub: "exec-123"}, verb: "GET", resource: "pods", sub: "other"},
		{method: "BREW", rt: route{resource: "pods", name: "p"}, verb: "OTHER", resource: "pods", sub: ""},
	}
	for _, tc := range tests {
		verb, resource, sub := requestLabels(tc.method, tc.rt, tc.watch, tc.ct)
		if verb != tc.verb || resource != tc.resource || sub != tc.sub {
			t.Errorf("requestLabels(%s %+v watch=%v) = %s/%s/%s, want %s/%s/%s", tc.method, tc.rt, tc.watch, verb, resource, sub, tc.verb, tc.resource, tc.sub)
		}
	}
}

// TestMetricsSeriesBounded: requests to many distinct pod names, unknown
// resources, unknown subresources and made-up methods add no series once
// each shape of request was seen: label values come from the route, never
// from the URL.
func TestMetricsSeriesBounded(t *testing.T) {
	s, _, _ := newTestServer(t)
	round := func(i int) {
		name := fmt.Sprintf("pod-%d", i)
		body := strings.Replace(goodPod, `"name":"p","uid":"11111111-2222-3333-4444-555555555555"`, `"name":"`+name+`"`, 1)
		if rec, _ := do(s, http.MethodPost, "/api/v1/namespaces/default/pods", "", body); rec.Code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, rec.Code, rec.Body)
		}
		do(s, http.MethodGet, "/api/v1/namespaces/default/pods/"+name, "", "")
		do(s, http.MethodGet, "/api/v1/namespaces/default/pods/"+name+"/status", "", "")
		do(s, http.MethodGet, "/api/v1/namespaces/ns-"+name+"/pods/missing-"+name, "", "")
		do(s, http.MethodGet, "/api/v1/namespaces/default/pods/"+name+"/sub-"+name, "", "")
		do(s, http.MethodGet, "/api/v1/namespaces/default/kind-"+name, "", "")
		do(s, http.MethodGet, "/api/v1/kind-"+name+"/"+name, "", "")
		do(s, "M"+strings.ToUpper(strings.ReplaceAll(name, "-", "")), "/api/v1/namespaces/default/pods/"+name, "", "")
		do(s, http.MethodDelete, "/api/v1/namespaces/default/pods/"+name, "", "")
	}
	series := func() int {
		mfs, err := s.metrics.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), "bootlet_api_request") {
				n += len(mf.GetMetric())
			}
		}
		return n
	}
	round(0)
	before := series()
	if before == 0 {
		t.Fatal("no request series recorded")
	}
	for i := 1; i <= 200; i++ {
		round(i)
	}
	if after := series(); after != before {
		t.Errorf("request series grew from %d to %d after 200 rounds of distinct URLs", before, after)
	}
}
