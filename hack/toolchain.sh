#!/usr/bin/env bash
# Builds the node toolchain (containerd, runc, CNI plugins, kubelet, kubectl and,
# with --control-plane, kube-apiserver/controller-manager/scheduler + etcd;
# with --addons, kube-proxy, flanneld + install-conf, the flannel CNI plugin and
# coredns) from Go modules pinned under hack/tools/<name>/go.mod into _output/.
#
# Usage: hack/toolchain.sh [--control-plane] [--addons] [--force] [--only NAME[,NAME...]]
#        hack/toolchain.sh --lint [--force]
#        hack/toolchain.sh --conformance [--force] [--only NAME[,NAME...]]
#        hack/toolchain.sh --target VERSION [--force] [--only NAME[,NAME...]]
#        hack/toolchain.sh --conformance --target VERSION [--force] [--only NAME[,NAME...]]
#
# Incremental: a binary is skipped when it exists and its stamp file
# (_output/stamps/<name>.stamp) matches the hash of its tools module
# (go.mod + go.sum + *.go), the Go version and the build params. Editing this
# script rebuilds nothing unless it changes a version or build parameter.
#
# --lint builds the lint tools (staticcheck) instead of the node binaries
# (hack/lint.sh runs them). --conformance builds the conformance tools instead:
# e2e.test and ginkgo, and the binaries of the test images (agnhost, nnp,
# sample-apiserver) that `hack/images.sh conformance` packs. --target builds
# the Kubernetes binaries, etcd and CoreDNS of another version (a row of
# hack/versions.sh, modules in hack/tools/versions/VERSION) into
# _output/versions/VERSION/bin, stamps in _output/versions/VERSION/stamps.
# --conformance --target VERSION builds that version's conformance tools
# instead (module hack/tools/versions/VERSION/conformance), into the same
# directories: v1.36.3's _output/bin/e2e.test is not touched.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "${HACK}/versions.sh"
TOOLS="${HACK}/tools"
STAMPS="${OUT}/stamps"

CONTROL_PLANE=0
ADDONS=0
LINT=0
CONFORMANCE=0
FORCE=0
ONLY=""
TARGET=""

usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --control-plane) CONTROL_PLANE=1 ;;
    --addons) ADDONS=1 ;;
    --lint) LINT=1 ;;
    --conformance) CONFORMANCE=1 ;;
    --force) FORCE=1 ;;
    --only) ONLY="$2"; shift ;;
    --only=*) ONLY="${1#--only=}" ;;
    --target) [[ $# -ge 2 ]] || die "--target needs a VERSION"; TARGET="$2"; shift ;;
    --target=*) TARGET="${1#--target=}" ;;
    -h|--help) usage; exit 0 ;;
    *) log "unknown flag: $1"; usage >&2; exit 2 ;;
  esac
  shift
done

if [[ -n "${TARGET}" ]]; then
  [[ ${CONTROL_PLANE}${ADDONS}${LINT} == 000 ]] \
    || die "--target builds a version's whole set (with --conformance, its conformance tools); it takes no --control-plane, --addons or --lint"
  target_version "${TARGET}"
  TOOLS="${TARGET_TOOLS}"
  BIN="${TARGET_OUT}/bin"
  STAMPS="${TARGET_OUT}/stamps"
  mkdir -p "${BIN}" "${STAMPS}"
else
  mkdir -p "${BIN}" "${CNI_BIN}" "${STAMPS}"
fi

go_reproducible
# A target version may need a newer Go than the machine's (hack/versions.sh).
if [[ -n "${TARGET}" ]]; then
  export GOTOOLCHAIN="${TARGET_GOTOOLCHAIN}"
fi

K8S_VERSION=v1.36.3
CONTAINERD_VERSION=v2.2.1
RUNC_VERSION=1.5.2
CNI_VERSION=v1.9.1
ETCD_VERSION=v3.6.8
FLANNEL_VERSION=v0.28.10
CNI_FLANNEL_VERSION=v0.9.1
# test/images/agnhost/VERSION of k8s.io/kubernetes at K8S_VERSION: the tag of
# registry.k8s.io/e2e-test-images/agnhost in test/utils/image/manifest.go.
AGNHOST_VERSION=2.63.0
if [[ -n "${TARGET}" ]]; then
  K8S_VERSION="${TARGET_K8S}"
  ETCD_VERSION="${TARGET_ETCD}"
  AGNHOST_VERSION="${TARGET_AGNHOST}"
fi

GO_VERSION="$(go env GOVERSION)"
TOTAL_START=$(now)

# The flags every build gets; part of each stamp.
BUILD_FLAGS="-trimpath -ldflags=-s -w"

# module_hash MODULE_DIR PARAM...: what a binary depends on: its module's
# go.mod, go.sum and *.go, the Go version, GOFLAGS and the build parameters.
# The *.go and go.mod files of subdirectories count too: a module may replace
# a dependency with a local one (tools/flannel's tencentvpc-stub); for the
# modules without subdirectories the hash is what it always was.
module_hash() {
  local dir="$1"; shift
  {
    cat "${dir}/go.mod" "${dir}/go.sum"
    find "${dir}" -maxdepth 1 -name '*.go' -print0 | sort -z | xargs -0 -r cat
    find "${dir}" -mindepth 2 \( -name '*.go' -o -name go.mod \) -print0 | sort -z | xargs -0 -r cat
    echo "${GO_VERSION}"
    echo "${GOFLAGS}"
    echo "${BUILD_FLAGS}"
    printf '%s\n' "$@"
  } | sha256sum | cut -d' ' -f1
}

selected() { # name
  [[ -z "${ONLY}" ]] && return 0
  [[ ",${ONLY}," == *",$1,"* ]]
}

# build NAME MODULE_DIR PKG OUTFILE CGO TAGS LDFLAGS [GOCMD]
# GOCMD is `build` (default) or `test`: `go test -c` compiles a package's
# test binary (e2e.test), which `go build` cannot; -vet=off, since vetting
# upstream's tests is not ours to do and costs minutes here.
build() {
  local name="$1" mod="$2" pkg="$3" outfile="$4" cgo="$5" tags="$6" ldflags="$7" gocmd="${8:-build}"
  selected "${name}" || return 0
  local hash stamp="${STAMPS}/${name}.stamp"
  local extra=()
  [[ "${gocmd}" == build ]] || extra=("${gocmd}")
  hash="$(module_hash "${mod}" "${pkg}" "${cgo}" "${tags}" "${ldflags}" "${extra[@]}")"
  local start end
  start=$(now)
  if [[ ${FORCE} -eq 0 && -x "${outfile}" && -f "${stamp}" && "$(cat "${stamp}")" == "${hash}" ]]; then
    end=$(now)
    printf '%-28s up-to-date   %6ss  %s\n' "${name}" "$(elapsed "${start}" "${end}")" "${outfile#"${REPO_ROOT}"/}"
    return 0
  fi
  local tmp="${outfile}.tmp.$$"
  (
    cd "${mod}"
    local c=(build)
    [[ "${gocmd}" == test ]] && c=(test -c -vet=off)
    CGO_ENABLED="${cgo}" go "${c[@]}" -trimpath -tags "${tags}" -ldflags "-s -w ${ldflags}" -o "${tmp}" "${pkg}"
  ) || { rm -f "${tmp}"; die "FAILED building ${name}"; }
  mv -f "${tmp}" "${outfile}"
  # Replace, never rewrite in place: _output may be a hardlinked copy (cp -al).
  echo "${hash}" > "${stamp}.tmp.$$"
  mv -f "${stamp}.tmp.$$" "${stamp}"
  end=$(now)
  printf '%-28s built        %6ss  %s (%s)\n' "${name}" "$(elapsed "${start}" "${end}")" \
    "${outfile#"${REPO_ROOT}"/}" "$(du -h "${outfile}" | cut -f1)"
}

# The k8s module and version ldflags: the node binaries and --conformance.
K8S_MOD="${TOOLS}/kubernetes"
K8S_MAJOR="${K8S_VERSION#v}"; K8S_MAJOR="${K8S_MAJOR%%.*}"
K8S_MINOR="${K8S_VERSION#v*.}"; K8S_MINOR="${K8S_MINOR%%.*}"
K8S_LD=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  K8S_LD+=" -X ${p}.gitVersion=${K8S_VERSION} -X ${p}.gitMajor=${K8S_MAJOR} -X ${p}.gitMinor=${K8S_MINOR}"
  K8S_LD+=" -X ${p}.gitTreeState=clean -X ${p}.buildDate=1970-01-01T00:00:00Z"
done

# --- lint tools (--lint only) ------------------------------------------------
if [[ ${LINT} -eq 1 ]]; then
  build staticcheck "${TOOLS}/staticcheck" honnef.co/go/tools/cmd/staticcheck "${BIN}/staticcheck" 0 "" ""
  printf '%-28s total        %6ss\n' "toolchain" "$(elapsed "${TOTAL_START}" "$(now)")"
  exit 0
fi

# --- conformance tools (--conformance only) ------------------------------------
# All from tools/conformance, so e2e.test and the images' binaries share the
# pinned k8s.io/kubernetes and its staging modules (sample-apiserver is one).
# e2e.test gets the version ldflags of the other k8s binaries: the suite logs
# it and some tests compare it with the server's version. Static (CGO off) as
# upstream builds them; the images run them on a busybox rootfs.
# The conformance tools have a module of their own (tools/conformance: the
# same pins plus the test-only dependencies), so that they do not change
# tools/kubernetes' hash and rebuild the node's binaries.
# With --target, the version's own module (hack/tools/versions/VERSION/
# conformance) and output directories.
CONF_MOD="${TOOLS}/conformance"
if [[ ${CONFORMANCE} -eq 1 ]]; then
  [[ -f "${CONF_MOD}/go.mod" ]] || die "${CONF_MOD}/go.mod is missing"
  build e2e.test "${CONF_MOD}" k8s.io/kubernetes/test/e2e "${BIN}/e2e.test" 0 "" "${K8S_LD}" test
  build ginkgo "${CONF_MOD}" github.com/onsi/ginkgo/v2/ginkgo "${BIN}/ginkgo" 0 "" ""
  build agnhost "${CONF_MOD}" k8s.io/kubernetes/test/images/agnhost "${BIN}/agnhost" 0 "" \
    "-X main.Version=${AGNHOST_VERSION}"
  build nnp "${CONF_MOD}" k8s.io/kubernetes/test/images/nonewprivs "${BIN}/nnp" 0 "" ""
  build sample-apiserver "${CONF_MOD}" k8s.io/sample-apiserver "${BIN}/sample-apiserver" 0 "" "${K8S_LD}"
  label=toolchain
  [[ -z "${TARGET}" ]] || label="toolchain ${TARGET_K8S}"
  printf '%-28s total        %6ss\n' "${label}" "$(elapsed "${TOTAL_START}" "$(now)")"
  exit 0
fi

# --- another version (--target only) ------------------------------------------
# What a node of that version runs from images: the control plane, kube-proxy,
# kubectl, etcd and CoreDNS, and the kubelet (packed as an image too, so that
# an air-gapped node receives a whole version as archives). One module for
# the six Kubernetes binaries (the current version splits kube-proxy off only
# to keep its older stamps), etcd and CoreDNS in their own, as above.
if [[ -n "${TARGET}" ]]; then
  for b in kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
    build "${b}" "${TOOLS}/kubernetes" "k8s.io/kubernetes/cmd/${b}" "${BIN}/${b}" 0 "" "${K8S_LD}"
  done
  build etcd "${TOOLS}/etcd" . "${BIN}/etcd" 0 "" \
    "-X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_VERSION}"
  build coredns "${TOOLS}/coredns" github.com/coredns/coredns "${BIN}/coredns" 0 "" ""
  printf '%-28s total        %6ss\n' "toolchain ${TARGET_K8S}" "$(elapsed "${TOTAL_START}" "$(now)")"
  exit 0
fi

# --- containerd --------------------------------------------------------------
CTRD_MOD="${TOOLS}/containerd"
CTRD_TAGS="no_btrfs no_devmapper no_zfs"
CTRD_LD="-X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION} -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
build containerd "${CTRD_MOD}" github.com/containerd/containerd/v2/cmd/containerd "${BIN}/containerd" 0 "${CTRD_TAGS}" "${CTRD_LD}"
build containerd-shim-runc-v2 "${CTRD_MOD}" github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 "${BIN}/containerd-shim-runc-v2" 0 "${CTRD_TAGS}" "${CTRD_LD}"
build ctr "${CTRD_MOD}" github.com/containerd/containerd/v2/cmd/ctr "${BIN}/ctr" 0 "${CTRD_TAGS}" "${CTRD_LD}"

# --- runc (cgo + libseccomp) -------------------------------------------------
if selected runc; then
  ensure_apt libseccomp-dev pkg-config gcc libc6-dev
fi
build runc "${TOOLS}/runc" github.com/opencontainers/runc "${BIN}/runc" 1 "seccomp urfave_cli_no_docs" \
  "-X main.version=${RUNC_VERSION}"

# --- CNI plugins -------------------------------------------------------------
CNI_LD="-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=${CNI_VERSION}"
for p in main/bridge ipam/host-local main/loopback meta/portmap; do
  build "cni-${p#*/}" "${TOOLS}/cni" "github.com/containernetworking/plugins/plugins/${p}" "${CNI_BIN}/${p#*/}" 0 "" "${CNI_LD}"
done

# --- kubernetes --------------------------------------------------------------
K8S_BINS=(kubelet kubectl)
if [[ ${CONTROL_PLANE} -eq 1 ]]; then
  K8S_BINS+=(kube-apiserver kube-controller-manager kube-scheduler)
fi
for b in "${K8S_BINS[@]}"; do
  build "${b}" "${K8S_MOD}" "k8s.io/kubernetes/cmd/${b}" "${BIN}/${b}" 0 "" "${K8S_LD}"
done
# kube-proxy has a module of its own (the same pins plus its own
# dependencies): adding it to tools/kubernetes would change that module's
# hash and rebuild every binary above for nothing.
if [[ ${ADDONS} -eq 1 ]]; then
  build kube-proxy "${TOOLS}/kube-proxy" k8s.io/kubernetes/cmd/kube-proxy "${BIN}/kube-proxy" 0 "" "${K8S_LD}"
fi

# --- etcd (control plane only) ----------------------------------------------
if [[ ${CONTROL_PLANE} -eq 1 ]]; then
  build etcd "${TOOLS}/etcd" . "${BIN}/etcd" 0 "" \
    "-X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_VERSION}"
fi

# --- add-ons (--addons only) -------------------------------------------------
if [[ ${ADDONS} -eq 1 ]]; then
  # flanneld: upstream's main package, which imports every backend. The UDP
  # backend's amd64 proxy is C, so CGO_ENABLED=0 does not compile; build it as
  # upstream does (cgo, -extldflags -static) with netgo/osusergo so that no
  # libc resolver is linked in: a static binary again. tencent-vpc's SDK is
  # not on the module proxy: tools/flannel replaces it with a stub.
  if selected flanneld; then
    ensure_apt gcc libc6-dev
  fi
  build flanneld "${TOOLS}/flannel" github.com/flannel-io/flannel "${BIN}/flanneld" 1 "netgo osusergo" \
    "-X github.com/flannel-io/flannel/pkg/version.Version=${FLANNEL_VERSION} -linkmode external -extldflags -static"
  build flannel-install-conf "${TOOLS}/flannel" github.com/flannel-io/flannel/cmd/install_conf "${BIN}/flannel-install-conf" 0 "" ""
  # The flannel CNI plugin: flannel-io/cni-plugin is not on the module proxy;
  # containernetworking/plugins v0.9.1's plugins/meta/flannel is the code it
  # was forked from (plugins v1.x dropped it). Into the node's CNI dir too, so
  # a containerd finds it before the flannel DaemonSet installs its own copy.
  build cni-flannel "${TOOLS}/cni-flannel" github.com/containernetworking/plugins/plugins/meta/flannel "${CNI_BIN}/flannel" 0 "" \
    "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=${CNI_FLANNEL_VERSION}"
  # coredns: the version kubeadm v1.36 deploys (CoreDNSVersion in
  # cmd/kubeadm/app/constants); its version is a constant, no ldflags.
  build coredns "${TOOLS}/coredns" github.com/coredns/coredns "${BIN}/coredns" 0 "" ""
fi

TOTAL_END=$(now)
printf '%-28s total        %6ss\n' "toolchain" "$(elapsed "${TOTAL_START}" "${TOTAL_END}")"
