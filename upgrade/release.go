package upgrade

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Releases are the versions bootlet can run and upgrade between, one row
// per Kubernetes version that hack/ builds (toolchain.sh's pins, and
// versions.sh's targets): each with the etcd and CoreDNS that kubeadm of
// that version deploys. A version that is not here has no images to run.
var Releases = map[string]Versions{
	"v1.36.3": {Kubernetes: "v1.36.3", Etcd: "3.6.8", CoreDNS: "v1.14.2"},
	"v1.37.2": {Kubernetes: "v1.37.2", Etcd: "3.7.0", CoreDNS: "v1.14.6"},
}

// Release is the row of Releases for a Kubernetes version, or an error
// that lists the versions there are.
func Release(kubernetes string) (Versions, error) {
	if v, ok := Releases[kubernetes]; ok {
		return v, nil
	}
	var known []string
	for k := range Releases {
		known = append(known, k)
	}
	sort.Strings(known)
	return Versions{}, fmt.Errorf("no release %q: bootlet has images for %s", kubernetes, strings.Join(known, ", "))
}

// DesiredVersions is the release of Kubernetes version kubernetes, with
// etcd left out (Etcd "": no etcd step) unless etcdUpgrade, as kubeadm's
// `upgrade apply --etcd-upgrade=false` leaves etcd as it runs.
func DesiredVersions(kubernetes string, etcdUpgrade bool) (Versions, error) {
	v, err := Release(kubernetes)
	if err == nil && !etcdUpgrade {
		v.Etcd = ""
	}
	return v, err
}

// EtcdReleases are the etcd versions of every release: the versions an
// etcd member can be moved through (EtcdPath).
func EtcdReleases() []string {
	var out []string
	for _, v := range Releases {
		out = append(out, v.Etcd)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// The image repositories of the components (hack/images.sh's names).
const (
	imageRegistry = "registry.k8s.io"
	kubeletImage  = "bootlet.dev/kubelet"
)

// Images are the references of every image a node needs to run v: the
// control plane's (masters), kube-proxy's and the kubelet's (every node),
// etcd's and CoreDNS's.
func Images(v Versions) map[Component]string {
	return map[Component]string{
		Etcd:              imageRegistry + "/etcd:" + v.Etcd + "-0",
		APIServer:         imageRegistry + "/kube-apiserver:" + v.Kubernetes,
		ControllerManager: imageRegistry + "/kube-controller-manager:" + v.Kubernetes,
		Scheduler:         imageRegistry + "/kube-scheduler:" + v.Kubernetes,
		KubeProxy:         imageRegistry + "/kube-proxy:" + v.Kubernetes,
		CoreDNS:           imageRegistry + "/coredns/coredns:" + v.CoreDNS,
		Kubelet:           kubeletImage + ":" + v.Kubernetes,
	}
}

// NodeImages are the images of v a node needs: every one on a master; on
// a worker those of the components a worker runs (kube-proxy, the
// kubelet) and CoreDNS, which may be scheduled there.
func NodeImages(v Versions, master bool) []string {
	var out []string
	for c, ref := range Images(v) {
		if v.Of(c) == "" {
			continue // a component the upgrade leaves as it is (etcd, with --etcd-upgrade=false)
		}
		switch c {
		case Etcd, APIServer, ControllerManager, Scheduler:
			if !master {
				continue
			}
		}
		out = append(out, ref)
	}
	sort.Strings(out)
	return out
}

// VersionOfImage is the version an image reference runs: its tag, without
// a digest, and for etcd without kubeadm's image revision ("3.6.8-0").
// A reference with no tag (a bare image ID, a digest alone) has none.
func VersionOfImage(ref string) string {
	if strings.HasPrefix(ref, "sha256:") {
		return ""
	}
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	slash := strings.LastIndex(ref, "/")
	colon := strings.LastIndex(ref, ":")
	if colon <= slash {
		return ""
	}
	tag := ref[colon+1:]
	if strings.HasSuffix(ref[:colon], "/etcd") {
		if i := strings.LastIndex(tag, "-"); i > 0 && isDigits(tag[i+1:]) {
			tag = tag[:i]
		}
	}
	return tag
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// ImageOf is the reference of comp's image at version v (a Kubernetes
// version, or etcd's or CoreDNS's own for those): what a step sets, and
// what a rollback puts back.
func ImageOf(comp Component, v string) string {
	return Images(Versions{Kubernetes: v, Etcd: v, CoreDNS: v})[comp]
}
