package podapi

import (
	"net/url"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseStreamOptions(t *testing.T) {
	for _, tc := range []struct {
		name, sub, query string
		want             streamOptions
		err              string
	}{
		{name: "exec tty", sub: "exec", query: "command=sh&command=-c&command=echo+hi&stdin=true&stdout=true&stderr=true&tty=true&container=main",
			want: streamOptions{container: "main", command: []string{"sh", "-c", "echo hi"}, stdin: true, stdout: true, tty: true}},
		{name: "exec no tty keeps stderr", sub: "exec", query: "command=true&stdout=true&stderr=true",
			want: streamOptions{command: []string{"true"}, stdout: true, stderr: true}},
		{name: "exec without command", sub: "exec", query: "stdout=true", err: "at least one command"},
		{name: "exec without streams", sub: "exec", query: "command=true", err: "at least 1 of stdin, stdout, stderr"},
		{name: "attach", sub: "attach", query: "stdin=true&stdout=true&container=c",
			want: streamOptions{container: "c", stdin: true, stdout: true}},
		{name: "portforward", sub: "portforward", query: "ports=8080&ports=53", want: streamOptions{ports: []int32{8080, 53}}},
		{name: "portforward none (SPDY names ports per stream)", sub: "portforward", query: "", want: streamOptions{}},
		{name: "portforward out of range", sub: "portforward", query: "ports=70000", err: "70000"},
		{name: "portforward zero", sub: "portforward", query: "ports=0", err: "invalid port 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			got, err := parseStreamOptions(tc.sub, q)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !apierrors.IsBadRequest(err) {
					t.Fatalf("err = %v, want a BadRequest containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.container != tc.want.container || strings.Join(got.command, "|") != strings.Join(tc.want.command, "|") ||
				got.stdin != tc.want.stdin || got.stdout != tc.want.stdout || got.stderr != tc.want.stderr || got.tty != tc.want.tty ||
				len(got.ports) != len(tc.want.ports) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestStreamContainer(t *testing.T) {
	one := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
	two := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "init"}}, Containers: []v1.Container{{Name: "a"}, {Name: "b"}}}}
	for _, tc := range []struct {
		pod       *v1.Pod
		name, out string
		err       string
	}{
		{pod: one, out: "a"},
		{pod: one, name: "a", out: "a"},
		{pod: one, name: "x", err: "container x is not valid for pod p"},
		{pod: two, err: "a container name must be specified for pod p, choose one of: [init a b]"},
		{pod: two, name: "b", out: "b"},
		{pod: two, name: "init", out: "init"},
	} {
		got, err := streamContainer(tc.pod, tc.name)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err || !apierrors.IsBadRequest(err) {
				t.Errorf("streamContainer(%q) err = %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.out {
			t.Errorf("streamContainer(%q) = %q, %v; want %q", tc.name, got, err, tc.out)
		}
	}
}

func TestIsStreamSubresource(t *testing.T) {
	for _, sub := range []string{"exec", "attach", "portforward"} {
		if !IsStreamSubresource("pods", sub) {
			t.Errorf("pods/%s not a stream subresource", sub)
		}
	}
	for _, r := range [][2]string{{"pods", "log"}, {"pods", ""}, {"secrets", "exec"}, {"pods", "status"}} {
		if IsStreamSubresource(r[0], r[1]) {
			t.Errorf("%s/%s taken for a stream subresource", r[0], r[1])
		}
	}
}
