# shellcheck shell=bash
# hack/versions.sh: the Kubernetes versions hack/ builds *beside* the current
# one (v1.36.3, pinned in toolchain.sh, images.sh and hack/tools/*): the
# targets of an upgrade, which `make upgrade-images TO=VERSION`
# (hack/upgrade-images.sh, toolchain.sh --target, images.sh --target) builds
# into their own directories. Source it after lib.sh; it defines functions
# only.
#
# To add a version: a row below, and its pinned modules under
# hack/tools/versions/VERSION/{kubernetes,etcd,coredns} (copy the previous
# version's go.mod files, change the versions, `GOFLAGS=-mod=mod go mod tidy`
# in each). Its conformance suite (`make conformance
# CONFORMANCE_VERSION=VERSION`: toolchain.sh --conformance --target, images.sh
# --target VERSION conformance) needs hack/tools/versions/VERSION/conformance
# too (hack/tools/conformance's go.mod and conformance.go at that version) and
# the TARGET_CONF_* tags below.

# target_versions: the versions target_version accepts, one a line.
target_versions() { echo v1.37.2; }

# target_version VERSION: sets the pins of VERSION, or dies naming the
# versions it knows.
#   TARGET_K8S         k8s.io/kubernetes and its binaries' --version
#   TARGET_ETCD        go.etcd.io/etcd/server/v3, kubeadm's DefaultEtcdVersion
#   TARGET_ETCD_TAG    the tag of registry.k8s.io/etcd (kubeadm's, with -0)
#   TARGET_COREDNS     github.com/coredns/coredns, kubeadm's CoreDNSVersion
#   TARGET_GOTOOLCHAIN GOTOOLCHAIN for its builds: local, or e.g. go1.27.3
#                      when the version's go.mod needs a newer Go
#   TARGET_AGNHOST     test/images/agnhost/VERSION at that version: agnhost's
#                      -X main.Version and its image's tag
#   TARGET_CONF_BUSYBOX, TARGET_CONF_GLIBC_DNS, TARGET_CONF_NGINX
#                      the tags of e2e-test-images/busybox, glibc-dns-testing
#                      and nginx in its test/utils/image/manifest.go (the
#                      conformance images whose tags moved since v1.36.3)
#   TARGET_TOOLS       its modules, hack/tools/versions/VERSION
#   TARGET_OUT         its binaries (bin/) and stamps (stamps/), _output/versions/VERSION
#   TARGET_IMAGES      its OCI archives, _output/images/VERSION
# The etcd and CoreDNS pins are what kubeadm of that version deploys:
# cmd/kubeadm/app/constants/constants.go of k8s.io/kubernetes@VERSION; the
# conformance tags are test/utils/image/manifest.go's (TARGET_ETCD_TAG is the
# aggregator spec's etcd there too).
# shellcheck disable=SC2034 # the TARGET_* variables are for the caller
target_version() {
  case "$1" in
    v1.37.2)
      # kubeadm v1.37.2: DefaultEtcdVersion "3.7.0-0" (SupportedEtcdVersion
      # maps 34, 35 and 36 to it and has no 37 row: EtcdSupportedVersion
      # falls back to the nearest one, the same 3.7.0-0), CoreDNSVersion
      # "v1.14.6". k8s.io/kubernetes v1.37.2's go.mod says go 1.26.0: the
      # machine's Go 1.26 builds it.
      TARGET_K8S=v1.37.2
      TARGET_ETCD=v3.7.0
      TARGET_ETCD_TAG=3.7.0-0
      TARGET_COREDNS=v1.14.6
      TARGET_GOTOOLCHAIN=local
      # test/utils/image/manifest.go v1.37.2 against v1.36.3: agnhost
      # 2.63.0 -> 2.66.1, busybox 1.37.0-1 -> 1.37.0-2, glibc-dns-testing
      # 2.0.0 -> 2.1.1, nginx 1.15-4 -> 1.27.0-2, etcd 3.6.8-0 -> 3.7.0-0;
      # agnhost 2.55 (AgnhostPrev), kitten and nautilus 1.8, nonewprivs 1.4,
      # nonroot 1.5, sample-apiserver 1.29.2 and pause 3.10.2 unchanged.
      TARGET_AGNHOST=2.66.1
      TARGET_CONF_BUSYBOX=1.37.0-2
      TARGET_CONF_GLIBC_DNS=2.1.1
      TARGET_CONF_NGINX=1.27.0-2
      ;;
    *)
      die "unknown target version '$1': hack/versions.sh pins $(target_versions | paste -sd' ') (v1.36.3 is the current version: make toolchain images)"
      ;;
  esac
  TARGET_TOOLS="${HACK}/tools/versions/$1"
  TARGET_OUT="${OUT}/versions/$1"
  TARGET_IMAGES="${OUT}/images/$1"
  [[ -f "${TARGET_TOOLS}/kubernetes/go.mod" ]] || die "${TARGET_TOOLS}/kubernetes/go.mod is missing"
}
