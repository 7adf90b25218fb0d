package podapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/bootlet/bootlet/podapi/authz"
	btypes "github.com/bootlet/bootlet/types"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         requestClass
	}{
		{"GET", "/healthz", classExempt},
		{"GET", "/readyz", classExempt},
		{"GET", "/version", classShort},
		{"GET", "/api/v1/namespaces/default/pods", classShort},
		{"POST", "/api/v1/namespaces/default/pods", classShort},
		{"GET", "/api/v1/namespaces/default/pods?watch=true", classWatch},
		{"GET", "/api/v1/pods?watch=1", classWatch},
		{"GET", "/api/v1/namespaces/default/pods/p/log", classShort},
		{"GET", "/api/v1/namespaces/default/pods/p/log?follow=true", classStream},
		{"POST", "/api/v1/namespaces/default/pods/p/exec?command=sh", classStream},
		{"GET", "/api/v1/namespaces/default/pods/p/attach", classStream},
		{"POST", "/api/v1/namespaces/default/pods/p/portforward", classStream},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		ri, err := authz.RequestInfo(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := classify(req, ri); got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.method, tc.path, got, tc.want)
		}
	}
}

// TestLimiterCaps: each class has a total and a per-user cap; a slot is
// given back once, however often release runs; 0 is no cap.
func TestLimiterCaps(t *testing.T) {
	l := newLimiter(Limits{MaxRequestsInFlight: 3, MaxRequestsInFlightPerUser: 2, MaxWatches: 1, MaxStreams: 0, MaxStreamsPerUser: 0})
	type step struct {
		class   requestClass
		user    string
		refused string // "" admitted, else a substring of the refusal
	}
	var releases []func()
	for i, s := range []step{
		{classShort, "a", ""},
		{classShort, "a", ""},
		{classShort, "a", `for user "a"`},
		{classShort, "b", ""},
		{classShort, "c", "(the limit is 3)"},
		{classWatch, "c", ""},
		{classWatch, "d", "too many watches"},
		{classStream, "d", ""}, // no cap
		{classExempt, "a", ""},
	} {
		release, refused := l.acquire(s.class, s.user)
		switch {
		case s.refused == "" && refused != "":
			t.Fatalf("step %d: refused %q", i, refused)
		case s.refused != "" && !strings.Contains(refused, s.refused):
			t.Fatalf("step %d: refused %q, want %q", i, refused, s.refused)
		case refused == "":
			releases = append(releases, release)
		}
	}
	for _, r := range releases {
		r()
		r()
	}
	for c := classShort; c < classExempt; c++ {
		if n := l.inFlight(c); n != 0 {
			t.Errorf("%s in flight after release: %d", c, n)
		}
	}
	if _, refused := l.acquire(classShort, "a"); refused != "" {
		t.Errorf("after release: %s", refused)
	}
}

// TestWatchCapOverHTTP: watches over the per-user and total caps get a 429
// Status with Retry-After, while other users' watches and every user's
// short requests are served; a closed watch frees its slot.
func TestWatchCapOverHTTP(t *testing.T) {
	s, _, _ := newTestServer(t)
	s.SetLimits(Limits{MaxWatches: 3, MaxWatchesPerUser: 2, RequestTimeout: time.Minute})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		as(s, r.Header.Get("X-Test-User"), "system:masters").ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	get := func(u, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, hs.URL+path, nil)
		req.Header.Set("X-Test-User", u)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	const watch = "/api/v1/namespaces/default/pods?watch=true"
	var open []*http.Response
	defer func() {
		for _, r := range open {
			r.Body.Close()
		}
	}()
	for _, tc := range []struct {
		user string
		code int
		msg  string
	}{
		{"a", 200, ""}, {"a", 200, ""}, {"a", 429, `too many watches in flight for user "a"`},
		{"b", 200, ""}, {"c", 429, "too many watches in flight (the limit is 3)"},
	} {
		resp := get(tc.user, watch)
		if resp.StatusCode != tc.code {
			t.Fatalf("watch as %s: %d, want %d", tc.user, resp.StatusCode, tc.code)
		}
		if tc.code == 200 {
			open = append(open, resp)
			continue
		}
		var st metav1.Status
		_ = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if st.Kind != "Status" || st.Reason != metav1.StatusReasonTooManyRequests || !strings.Contains(st.Message, tc.msg) ||
			resp.Header.Get("Retry-After") != "1" || st.Details == nil || st.Details.RetryAfterSeconds != 1 {
			t.Errorf("watch as %s over the cap: %+v, Retry-After %q", tc.user, st, resp.Header.Get("Retry-After"))
		}
	}
	for _, p := range []string{"/api/v1/namespaces/default/pods", "/readyz"} {
		if resp := get("a", p); resp.StatusCode == http.StatusTooManyRequests {
			t.Errorf("GET %s refused while watches are at their cap", p)
		} else {
			resp.Body.Close()
		}
	}
	open[0].Body.Close()
	open = open[1:]
	deadline := time.Now().Add(5 * time.Second)
	for s.limiter.inFlight(classWatch) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("a closed watch kept its slot: %d in flight", s.limiter.inFlight(classWatch))
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp := get("c", watch)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("watch after one closed: %d", resp.StatusCode)
	}
}

func TestRequestCapOverHTTP(t *testing.T) {
	s, _, _ := newTestServer(t)
	s.SetLimits(Limits{MaxRequestsInFlight: 10, MaxRequestsInFlightPerUser: 1})
	release, _ := s.limiter.acquire(classShort, "test-admin") // a request of the same user in flight
	rec, st := do(s, http.MethodGet, "/api/v1/namespaces/default/pods", "", "")
	if rec.Code != http.StatusTooManyRequests || st.Reason != metav1.StatusReasonTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("over the per-user cap: %d %+v", rec.Code, st)
	}
	if rec, _ := do(s, http.MethodGet, "/healthz", "", ""); rec.Code != http.StatusOK {
		t.Errorf("/healthz over the cap: %d", rec.Code)
	}
	release()
	if rec, _ := do(s, http.MethodGet, "/api/v1/namespaces/default/pods", "", ""); rec.Code != http.StatusOK {
		t.Errorf("after release: %d %s", rec.Code, rec.Body)
	}
}

// TestRequestDeadlines: a short request gets the request timeout as its
// context's deadline, a watch none.
func TestRequestDeadlines(t *testing.T) {
	s, _, _ := newTestServer(t)
	s.SetLimits(Limits{RequestTimeout: time.Minute})
	u := &user.DefaultInfo{Name: "u"}
	for path, wantDeadline := range map[string]bool{
		"/api/v1/namespaces/default/pods":                   true,
		"/api/v1/namespaces/default/pods?watch=true":        false,
		"/api/v1/namespaces/default/pods/p/log?follow=true": false,
	} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		ri, _ := authz.RequestInfo(req)
		rec := httptest.NewRecorder()
		r, release, ok := s.admit(rec, rec, req, u, ri)
		if !ok {
			t.Fatalf("%s refused", path)
		}
		d, has := r.Context().Deadline()
		if has != wantDeadline || (has && time.Until(d) > time.Minute) {
			t.Errorf("%s: deadline %v (%v), want one: %v", path, d, has, wantDeadline)
		}
		release()
	}
}

// TestListenerTimeouts: a client that sends headers and then only part of
// its body is cut off at the request timeout, and a deadline a short
// request left on a keep-alive connection does not end a later watch on it.
func TestListenerTimeouts(t *testing.T) {
	s, _, _ := newTestServer(t)
	s.SetLimits(Limits{RequestTimeout: 300 * time.Millisecond})
	old := writeGrace
	writeGrace = 100 * time.Millisecond
	t.Cleanup(func() { writeGrace = old })
	hs := httptest.NewServer(asAdmin(s))
	t.Cleanup(hs.Close)

	c, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode < 400 {
			t.Errorf("a stalled body got %d", resp.StatusCode)
		}
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("a stalled body held the connection for 5 s")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a stalled body was cut after %v", d)
	}

	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	r1, err := client.Get(hs.URL + "/api/v1/namespaces/default/pods")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, r1.Body)
	r1.Body.Close()
	w, err := client.Get(hs.URL + "/api/v1/namespaces/default/pods?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Body.Close()
	time.Sleep(time.Second) // past the first request's deadlines
	mustCreatePod(t, s, goodPod)
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(w.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		sc.Scan()
		line <- sc.Text()
	}()
	select {
	case l := <-line:
		if !strings.Contains(l, `"ADDED"`) {
			t.Errorf("watch after a short request on its connection: %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event")
	}
}

// TestJSONPatchLimits: the apiserver's limits, 10000 operations and 3 MiB
// of growth by copy operations; a refused patch changes nothing.
func TestJSONPatchLimits(t *testing.T) {
	s, _, _ := newTestServer(t)
	mustCreatePod(t, s, goodPod)
	before := getPod(t, s)
	ops := func(n int) string {
		op := `{"op":"test","path":"/metadata/name","value":"p"}`
		return "[" + strings.TrimSuffix(strings.Repeat(op+",", n), ",") + "]"
	}
	big := strings.Repeat("x", 200<<10)
	copies := []string{`{"op":"add","path":"/metadata/annotations","value":{"a":"` + big + `"}}`}
	for i := 0; i < 20; i++ { // 20 x 200 KiB: over 3 MiB
		copies = append(copies, fmt.Sprintf(`{"op":"copy","from":"/metadata/annotations/a","path":"/metadata/annotations/b%d"}`, i))
	}
	for _, tc := range []struct {
		name, body string
		code       int
		msg        string
	}{
		{"10000 operations", ops(10000), 200, ""},
		{"10001 operations", ops(10001), 413, "The allowed maximum operations in a JSON patch is 10000, got 10001"},
		{"copy bomb", "[" + strings.Join(copies, ",") + "]", 422, "exceeding the limit 3145728"},
	} {
		rec, _ := do(s, http.MethodPatch, "/api/v1/namespaces/default/pods/p", "application/json-patch+json", tc.body)
		// A 422 carries the patch error in its cause, as the apiserver's.
		if rec.Code != tc.code || (tc.msg != "" && !strings.Contains(rec.Body.String(), tc.msg)) {
			t.Errorf("%s: %d %.600s, want %d %q", tc.name, rec.Code, rec.Body.String(), tc.code, tc.msg)
		}
	}
	if after := getPod(t, s); len(after.Annotations) != len(before.Annotations) {
		t.Errorf("a refused patch changed the pod: %d annotations", len(after.Annotations))
	}
}

// TestMaxPods: past --max-pods a create gets 403 naming the limit, and
// nothing is stored; a delete makes room again.
func TestMaxPods(t *testing.T) {
	s, _, _ := newTestServer(t)
	s.Registry.SetPodPolicy(PodPolicy{MaxPods: 2})
	pod := func(name string) string {
		return `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`
	}
	a := mustCreatePod(t, s, pod("a"))
	mustCreatePod(t, s, pod("b"))
	for _, dry := range []string{"", "?dryRun=All"} {
		rec, st := do(s, http.MethodPost, "/api/v1/namespaces/default/pods"+dry, "application/json", pod("c"))
		if rec.Code != http.StatusForbidden || st.Reason != metav1.StatusReasonForbidden || !strings.Contains(st.Message, "node has reached its maximum of 2 pods") {
			t.Errorf("third pod%s: %d %+v", dry, rec.Code, st)
		}
	}
	if pods, _ := s.Registry.ListPods(""); len(pods) != 2 {
		t.Errorf("%d pods stored", len(pods))
	}
	if rec, _ := do(s, http.MethodDelete, "/api/v1/namespaces/default/pods/a?gracePeriodSeconds=0", "", ""); rec.Code != 200 {
		t.Fatalf("delete: %d %s", rec.Code, rec.Body)
	}
	s.Registry.PodTerminated(btypes.KeyOf(&a), a.UID) // the runtime stopped it
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec, _ := do(s, http.MethodPost, "/api/v1/namespaces/default/pods", "application/json", pod("c"))
		if rec.Code == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no room after a delete: %d %s", rec.Code, rec.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSecretEnvRefused: with the handoff on, a pod that takes Secret
// values into env is refused with 422 naming each field, on create,
// server-side apply and dry run; ConfigMap env and Secret volumes are
// fine; without the handoff the pod is accepted.
func TestSecretEnvRefused(t *testing.T) {
	podWith := func(name, ctr string) string {
		return `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `"},"spec":{` + ctr +
			`,"volumes":[{"name":"s","secret":{"secretName":"creds"}}]}}`
	}
	secretKey := `{"name":"S","valueFrom":{"secretKeyRef":{"name":"creds","key":"k"}}}`
	cmKey := `{"name":"C","valueFrom":{"configMapKeyRef":{"name":"conf","key":"k"}}}`
	cases := []struct {
		name, body string
		fields     []string
	}{
		{"secretKeyRef", podWith("a", `"containers":[{"name":"c","image":"i","env":[`+cmKey+`,`+secretKey+`]}]`),
			[]string{"spec.containers[0].env[1].valueFrom.secretKeyRef"}},
		{"envFrom secretRef in an init container", podWith("b", `"initContainers":[{"name":"i","image":"i","envFrom":[{"secretRef":{"name":"creds"}}]}],"containers":[{"name":"c","image":"i"}]`),
			[]string{"spec.initContainers[0].envFrom[0].secretRef"}},
		{"config map env and a secret volume", podWith("c", `"containers":[{"name":"c","image":"i","env":[`+cmKey+`],"envFrom":[{"configMapRef":{"name":"conf"}}],"volumeMounts":[{"name":"s","mountPath":"/s"}]}]`),
			nil},
	}
	for _, refuse := range []bool{true, false} {
		s, _, _ := newTestServer(t)
		s.Registry.SetPodPolicy(PodPolicy{RefuseSecretEnv: refuse})
		for _, tc := range cases {
			for _, how := range []struct{ method, path, ct string }{
				{http.MethodPost, "/api/v1/namespaces/default/pods?dryRun=All", "application/json"},
				{http.MethodPatch, "/api/v1/namespaces/default/pods/NAME?fieldManager=t", "application/apply-patch+yaml"},
			} {
				var p v1.Pod
				_ = json.Unmarshal([]byte(tc.body), &p)
				rec, st := do(s, how.method, strings.Replace(how.path, "NAME", p.Name, 1), how.ct, tc.body)
				want := len(tc.fields) > 0 && refuse
				if !want {
					if rec.Code >= 300 {
						t.Errorf("refuse=%v %s %s: %d %s", refuse, tc.name, how.method, rec.Code, rec.Body)
					}
					continue
				}
				var fields []string
				if st.Details != nil {
					for _, c := range st.Details.Causes {
						fields = append(fields, c.Field)
					}
				}
				if rec.Code != http.StatusUnprocessableEntity || st.Reason != metav1.StatusReasonInvalid ||
					strings.Join(fields, ",") != strings.Join(tc.fields, ",") || !strings.Contains(st.Message, "mount the Secret as a volume") {
					t.Errorf("refuse=%v %s %s: %d fields %v %s", refuse, tc.name, how.method, rec.Code, fields, st.Message)
				}
			}
		}
		pods, _ := s.Registry.ListPods("")
		if want := map[bool]int{true: 1, false: 3}[refuse]; len(pods) != want {
			t.Errorf("refuse=%v: %d pods stored, want %d", refuse, len(pods), want)
		}
	}
}
