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
# in each).

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
#   TARGET_TOOLS       its modules, hack/tools/versions/VERSION
#   TARGET_OUT         its binaries (bin/) and stamps (stamps/), _output/versions/VERSION
#   TARGET_IMAGES      its OCI archives, _output/images/VERSION
# The etcd and CoreDNS pins are what kubeadm of that version deploys:
# cmd/kubeadm/app/constants/constants.go of k8s.io/kubernetes@VERSION.
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
