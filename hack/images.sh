#!/usr/bin/env bash
# Builds OCI image layout archives into _output/images/ without docker:
#   pause.tar       registry.k8s.io/pause:3.10.1      (static C pause, /pause)
#   busybox.tar     docker.io/library/busybox:1.36     (Debian busybox-static)
#   testserver.tar  bootlet.dev/testserver:1           (Go test server + busybox)
# and the control-plane images into _output/images/control-plane/, from the
# static binaries `hack/toolchain.sh --control-plane` built into _output/bin:
#   kube-apiserver.tar, kube-controller-manager.tar, kube-scheduler.tar,
#   kubectl.tar     registry.k8s.io/<name>:v1.36.3
#   etcd.tar        registry.k8s.io/etcd:3.6.8-0      (etcd, etcdctl)
# and the cluster add-ons into _output/images/addons/, from the binaries
# `hack/toolchain.sh --addons` built and Debian 12's netfilter tools:
#   kube-proxy.tar  registry.k8s.io/kube-proxy:v1.36.3 (+ iptables-nft, nft, conntrack)
#   flannel.tar     ghcr.io/flannel-io/flannel:v0.28.10 (+ the same tools)
#   flannel-cni-plugin.tar  ghcr.io/flannel-io/flannel-cni-plugin:v0.9.1
#   coredns.tar     registry.k8s.io/coredns/coredns:v1.14.2
# They sit in subdirectories so that importing _output/images (every e2e
# test's containerd does) stays cheap; only the control plane imports them.
# `conformance` (not in the default set) builds the images the upstream
# [Conformance] tests run into _output/images/conformance/, with their
# upstream names (registry.k8s.io/e2e-test-images/..., pause:3.10.2), from the
# binaries `hack/toolchain.sh --conformance` built and Debian's C tools; see
# build_conformance and hack/README.md.
# `--target VERSION` (`make upgrade-images TO=VERSION`) builds another
# version's archives instead, from what `hack/toolchain.sh --target VERSION`
# built into _output/versions/VERSION/bin, all in _output/images/VERSION/:
# the control plane, kubectl, etcd, kube-proxy and CoreDNS as above, with
# that version's tags (hack/versions.sh), and the kubelet as
# bootlet.dev/kubelet:VERSION (the binary on the distroless base).
# `--target VERSION conformance` builds that version's conformance images
# instead, with its tags (hack/versions.sh), from what `hack/toolchain.sh
# --conformance --target VERSION` built, into
# _output/images/VERSION/conformance/.
#
# Usage: hack/images.sh [--force] [pause|busybox|testserver|control-plane|addons|conformance ...]
#        hack/images.sh --target VERSION [--force] [conformance]
#
# An archive is rebuilt only when one of its inputs is newer than it.
# Import with: _output/bin/ctr -n k8s.io --address SOCK images import FILE
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "${HACK}/versions.sh"
go_reproducible

IMAGES="${OUT}/images"
CP_IMAGES="${IMAGES}/control-plane"
ADDON_IMAGES="${IMAGES}/addons"
CONF_IMAGES="${IMAGES}/conformance"
# The tags of the conformance images that differ between versions (those of
# test/utils/image/manifest.go at v1.36.3; --target takes hack/versions.sh's).
AGNHOST_TAG=2.63.0
CONF_BUSYBOX_TAG=1.37.0-1
CONF_GLIBC_DNS_TAG=2.0.0
CONF_NGINX_TAG=1.15-4
# What build_conformance runs when a binary is missing, and the module that
# pins the k8s.io/kubernetes whose test/images it copies data files from.
CONF_HINT="hack/toolchain.sh --conformance"
CONF_K8S_MOD="${HACK}/tools/kubernetes"
CONF_GOTOOLCHAIN="${GOTOOLCHAIN}"
K8S_VERSION=v1.36.3
ETCD_IMAGE_TAG=3.6.8-0
FLANNEL_VERSION=v0.28.10
CNI_FLANNEL_VERSION=v0.9.1
# kubeadm v1.36's pin: CoreDNSVersion in k8s.io/kubernetes
# cmd/kubeadm/app/constants/constants.go (bump with K8S_VERSION).
COREDNS_VERSION=v1.14.2
WORK="${OUT}/build/images"
OCIBUILD="${OUT}/tools/ocibuild"
SCRIPT="${HACK}/images.sh"

export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-0}"

PATH_ENV="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# What to run when a binary is missing.
CP_HINT="hack/toolchain.sh --control-plane"
ADDON_HINT="hack/toolchain.sh --addons"
# The image of the kubelet of a --target version (upstream publishes none).
KUBELET_IMAGE=bootlet.dev/kubelet

FORCE=0
WANT=()
TARGET=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --force) FORCE=1 ;;
    --target) [[ $# -ge 2 ]] || die "--target needs a VERSION"; TARGET="$2"; shift ;;
    --target=*) TARGET="${1#--target=}" ;;
    -h|--help) sed -n '2,39p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    pause|busybox|testserver|control-plane|addons|conformance) WANT+=("$1") ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ -n "${TARGET}" ]]; then
  # Another version: its binaries, tags, archive directory and scratch space;
  # the current version's archives are not touched.
  [[ ${#WANT[@]} -eq 0 || "${WANT[*]}" == conformance ]] \
    || die "--target builds a version's whole set, or with conformance its conformance images; name no other image with it"
  target_version "${TARGET}"
  K8S_VERSION="${TARGET_K8S}"
  ETCD_IMAGE_TAG="${TARGET_ETCD_TAG}"
  COREDNS_VERSION="${TARGET_COREDNS}"
  BIN="${TARGET_OUT}/bin"
  CP_IMAGES="${TARGET_IMAGES}"
  ADDON_IMAGES="${TARGET_IMAGES}"
  WORK="${OUT}/build/images/${TARGET}"
  CP_HINT="hack/toolchain.sh --target ${TARGET}"
  ADDON_HINT="${CP_HINT}"
  # The conformance images of that version (build_conformance): its tags,
  # binaries and module, in TARGET_IMAGES/conformance.
  CONF_IMAGES="${TARGET_IMAGES}/conformance"
  CONF_HINT="hack/toolchain.sh --conformance --target ${TARGET}"
  CONF_K8S_MOD="${TARGET_TOOLS}/kubernetes"
  CONF_GOTOOLCHAIN="${TARGET_GOTOOLCHAIN}"
  AGNHOST_TAG="${TARGET_AGNHOST}"
  CONF_BUSYBOX_TAG="${TARGET_CONF_BUSYBOX}"
  CONF_GLIBC_DNS_TAG="${TARGET_CONF_GLIBC_DNS}"
  CONF_NGINX_TAG="${TARGET_CONF_NGINX}"
  [[ ${#WANT[@]} -gt 0 ]] || WANT=(target)
fi
[[ ${#WANT[@]} -gt 0 ]] || WANT=(pause busybox testserver control-plane addons)

mkdir -p "${IMAGES}" "${CP_IMAGES}" "${ADDON_IMAGES}" "${WORK}" "$(dirname "${OCIBUILD}")"

# stale OUTPUT INPUT... : true when OUTPUT is missing or older than any input.
stale() {
  local out="$1"; shift
  [[ ${FORCE} -eq 1 || ! -e "${out}" ]] && return 0
  [[ -n "$(find "$@" -newer "${out}" -print -quit 2>/dev/null)" ]]
}

ocibuild() {
  if stale "${OCIBUILD}" "${HACK}/ocibuild"; then
    (cd "${HACK}/ocibuild" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "${OCIBUILD}" .)
  fi
  "${OCIBUILD}" "$@"
}

# busybox_rootfs DIR [BUSYBOX]: Debian's static busybox (or the binary
# BUSYBOX, whose libraries the caller adds) with applet symlinks in /bin.
busybox_rootfs() {
  local root="$1" bb="${2:-/bin/busybox}"
  # An empty root would write /etc/hosts, /etc/resolv.conf, ... of this host.
  [[ "${root}" == "${WORK}"/* ]] || die "busybox_rootfs: refusing root '${root}' outside ${WORK}"
  rm -rf "${root}"
  mkdir -p "${root}"/{bin,etc,tmp,root,home,var/tmp,usr/bin,usr/sbin,sbin}
  chmod 1777 "${root}/tmp" "${root}/var/tmp"
  chmod 0700 "${root}/root"
  install -m 0755 "${bb}" "${root}/bin/busybox"
  local a
  for a in $("${bb}" --list); do
    [[ "${a}" == busybox ]] && continue
    ln -sf busybox "${root}/bin/${a}"
  done
  ln -sf busybox "${root}/bin/sh"
  cat > "${root}/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/home:/bin/false
EOF
  cat > "${root}/etc/group" <<'EOF'
root:x:0:
nogroup:x:65534:
EOF
  # CRI bind-mounts /etc/hosts, /etc/hostname and /etc/resolv.conf over these.
  : > "${root}/etc/hosts"
  : > "${root}/etc/hostname"
  : > "${root}/etc/resolv.conf"
}

build_pause() {
  local out="${IMAGES}/pause.tar" src="${HACK}/images/pause/pause.c"
  stale "${out}" "${src}" "${SCRIPT}" "${HACK}/ocibuild" || { echo "skip"; return 0; }
  command -v gcc >/dev/null || ensure_apt gcc libc6-dev
  local root="${WORK}/pause/rootfs"
  rm -rf "${root}"; mkdir -p "${root}"
  gcc -static -Os -Wall -o "${root}/pause" "${src}"
  strip "${root}/pause"
  ocibuild -rootfs "${root}" -name registry.k8s.io/pause:3.10.1 -o "${out}" \
    -entrypoint '["/pause"]' -user 65535:65535 -env "${PATH_ENV}"
}

build_busybox() {
  local out="${IMAGES}/busybox.tar"
  ensure_apt busybox-static
  stale "${out}" /bin/busybox "${SCRIPT}" "${HACK}/ocibuild" || { echo "skip"; return 0; }
  local root="${WORK}/busybox/rootfs"
  busybox_rootfs "${root}"
  ocibuild -rootfs "${root}" -name docker.io/library/busybox:1.36 -o "${out}" \
    -cmd '["sh"]' -env "${PATH_ENV}"
}

build_testserver() {
  local out="${IMAGES}/testserver.tar" src="${HACK}/images/testserver"
  ensure_apt busybox-static
  stale "${out}" "${src}" /bin/busybox "${SCRIPT}" "${HACK}/ocibuild" || { echo "skip"; return 0; }
  local root="${WORK}/testserver/rootfs"
  busybox_rootfs "${root}"
  (cd "${src}" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "${root}/testserver" .)
  ocibuild -rootfs "${root}" -name bootlet.dev/testserver:1 -o "${out}" \
    -entrypoint '["/testserver"]' -env "${PATH_ENV}" \
    -env HTTP_PORT=8080 -env TCP_PORT=8081 -env GRPC_PORT=9090 \
    -expose 8080/tcp -expose 8081/tcp -expose 9090/tcp
}

# distroless_rootfs DIR BINARY...: what the upstream (distroless-based)
# control-plane images hold besides their binaries: root, nobody and nonroot
# in /etc/passwd and /etc/group, nsswitch (Go's resolver reads it), a 1777
# /tmp, and the static binaries in /usr/local/bin. No shell: kubeadm's probes
# are httpGet, and the manifests name the command, resolved through PATH.
distroless_rootfs() {
  local root="$1"; shift
  # An empty root would write /etc/hosts, /etc/resolv.conf, ... of this host.
  [[ "${root}" == "${WORK}"/* ]] || die "distroless_rootfs: refusing root '${root}' outside ${WORK}"
  rm -rf "${root}"
  mkdir -p "${root}"/{etc,tmp,root,home/nonroot,usr/local/bin}
  chmod 1777 "${root}/tmp"
  chmod 0700 "${root}/root"
  cat > "${root}/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
  cat > "${root}/etc/group" <<'EOF'
root:x:0:
nobody:x:65534:
nonroot:x:65532:
EOF
  echo 'hosts: files dns' > "${root}/etc/nsswitch.conf"
  # CRI bind-mounts /etc/hosts, /etc/hostname and /etc/resolv.conf over these.
  : > "${root}/etc/hosts"
  : > "${root}/etc/hostname"
  : > "${root}/etc/resolv.conf"
  local b
  for b in "$@"; do
    # A hard link when possible: the binaries are 50-130 MB each.
    ln -f "${b}" "${root}/usr/local/bin/" 2>/dev/null || cp -f "${b}" "${root}/usr/local/bin/"
  done
}

# cp_image NAME REF ENTRYPOINT BINARY...: one control-plane archive; returns
# 1 when it is up to date. Entrypoints as upstream: kube-* and kubectl run
# their binary, etcd's image has it as Cmd. gzip level 6, not 9: on these
# binaries 9 costs several times the CPU for about one percent of size.
cp_image() {
  local name="$1" ref="$2" entry="$3"; shift 3
  local out="${CP_IMAGES}/${name}.tar" b
  for b in "$@"; do
    [[ -x "${b}" ]] || { echo "${b} is missing: run ${CP_HINT} first" >&2; exit 1; }
  done
  stale "${out}" "$@" "${SCRIPT}" "${HACK}/ocibuild" || return 1
  local root="${WORK}/control-plane/${name}/rootfs"
  distroless_rootfs "${root}" "$@"
  local kind=-entrypoint
  [[ "${name}" == etcd ]] && kind=-cmd
  ocibuild -rootfs "${root}" -name "${ref}" -o "${out}" "${kind}" "[\"${entry}\"]" \
    -env "${PATH_ENV}" -gzip-level 6 >&2
  rm -rf "${root}"
}

build_control-plane() {
  local built=0 n
  for n in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    if cp_image "${n}" "registry.k8s.io/${n}:${K8S_VERSION}" "/usr/local/bin/${n}" "${BIN}/${n}"; then built=1; fi
  done
  local etcd_bins=("${BIN}/etcd")
  [[ -x "${BIN}/etcdctl" ]] && etcd_bins+=("${BIN}/etcdctl")
  if cp_image etcd "registry.k8s.io/etcd:${ETCD_IMAGE_TAG}" /usr/local/bin/etcd "${etcd_bins[@]}"; then built=1; fi
  [[ ${built} -eq 1 ]] || echo "skip"
}

# --- add-ons -----------------------------------------------------------------

# Debian 12's packet-filter tools, which kube-proxy and flanneld exec; also
# in hack/deps.sh's list.
NETFILTER_PKGS=(iptables nftables conntrack)
# Where libxtables dlopen()s iptables' match and target extensions from
# (-m comment, -j MASQUERADE, ...): not in any binary's ldd output.
XTABLES_DIR=/usr/lib/x86_64-linux-gnu/xtables

# need_bin FILE...: fails naming the first add-on binary toolchain.sh has not
# built yet.
need_bin() {
  local b
  for b in "$@"; do
    [[ -x "${b}" ]] || { echo "${b} is missing: run ${ADDON_HINT} first" >&2; exit 1; }
  done
}

# host_stale OUTPUT LIST: true when LIST, the host files the last build of
# OUTPUT copied (written by debian_tools), is missing or one of them changed
# since. dpkg installs files with their packaged mtimes, so an apt upgrade of
# iptables or libc shows in their ctime (-cnewer), not in `stale`'s -newer.
host_stale() {
  local out="$1" list="$2" files changed
  [[ ${FORCE} -eq 1 || ! -e "${out}" || ! -s "${list}" ]] && return 0
  mapfile -t files < "${list}"
  # A file gone from the host fails find: rebuild, and debian_tools names it.
  changed="$(find "${files[@]}" -cnewer "${out}" -print -quit 2>/dev/null)" || return 0
  [[ -n "${changed}" ]]
}

# ldd_deps FILE: sets DEPS to the shared objects FILE loads (ldd's resolved
# paths, the dynamic loader included); empty for a static binary. Dies naming
# a library ldd cannot find. A variable, not output: it runs in this shell,
# so the die ends the build and the cache holds (kube-proxy and flannel carry
# the same ~130 files, and ldd costs a few processes per file).
declare -A _LDD_DEPS=()
DEPS=()
ldd_deps() {
  local f="$1" out
  if [[ -z "${_LDD_DEPS[${f}]+set}" ]]; then
    # ldd exits 1 on a static binary ("not a dynamic executable").
    out="$(LC_ALL=C ldd "${f}" 2>&1)" || true
    if grep -q 'not found' <<<"${out}"; then
      die "ldd ${f}: $(grep 'not found' <<<"${out}" | tr -s ' \t' ' ' | paste -sd,)"
    fi
    _LDD_DEPS[${f}]="$(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"${out}")"
  fi
  DEPS=()
  [[ -z "${_LDD_DEPS[${f}]}" ]] || mapfile -t DEPS <<<"${_LDD_DEPS[${f}]}"
}

# debian_tools ROOT FILE...: copies the host's FILEs (executables or shared
# objects from Debian packages) to the same paths under ROOT, with every
# shared object ldd resolves for them and the dynamic loader, so that they
# run from ROOT's own files (chroot, or a container of the image). Libraries
# keep the name ldd gives (the soname the loader looks up), dereferenced.
# Debian 12 has merged /usr (/lib -> usr/lib): directories are canonicalised
# and ROOT gets the same /bin /sbin /lib /lib64 links, so the PT_INTERP of
# every binary, /lib64/ld-linux-x86-64.so.2, resolves. Writes the host paths
# copied to ROOT.host-files for host_stale.
debian_tools() {
  local root="$1"; shift
  [[ "${root}" == "${WORK}"/* ]] || die "debian_tools: refusing root '${root}' outside ${WORK}"
  local d f src dst
  for d in bin sbin lib lib64; do
    mkdir -p "${root}/usr/${d}"
    [[ -e "${root}/${d}" || -L "${root}/${d}" ]] || ln -s "usr/${d}" "${root}/${d}"
  done
  local -A seen=()
  for f in "$@"; do
    [[ -e "${f}" ]] || die "debian_tools: ${f} is missing"
    ldd_deps "${f}"
    for src in "${f}" "${DEPS[@]}"; do
      [[ -z "${seen[${src}]+set}" ]] || continue
      seen[${src}]=1
      dst="${root}$(realpath -e -- "$(dirname -- "${src}")")/$(basename -- "${src}")"
      mkdir -p "$(dirname -- "${dst}")"
      cp -L --preserve=mode "${src}" "${dst}"
    done
  done
  printf '%s\n' "${!seen[@]}" | sort > "${root}.host-files"
}

# netfilter_tools ROOT: what kube-proxy (iptables and nftables modes, UDP
# conntrack cleanup) and flanneld (iptables or EnableNFTables) exec to program
# the kernel's packet filter, from Debian 12's packages: iptables on the
# nf_tables backend only (xtables-nft-multi under the iptables, ip6tables,
# *-save and *-restore names and their -nft twins; upstream's images pick
# nft or legacy with iptables-wrapper, but Debian 12 and this host use nft
# and one node must not mix the two), its extension modules, nft and
# conntrack.
netfilter_tools() {
  local root="$1" n
  ensure_apt "${NETFILTER_PKGS[@]}"
  debian_tools "${root}" /usr/sbin/xtables-nft-multi /usr/sbin/nft /usr/sbin/conntrack "${XTABLES_DIR}"/*.so
  for n in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    ln -sf xtables-nft-multi "${root}/usr/sbin/${n}"
    ln -sf xtables-nft-multi "${root}/usr/sbin/${n/tables/tables-nft}"
  done
  # The iptables lock (/run/xtables.lock, a hostPath in kube-proxy's
  # DaemonSet) lives here.
  mkdir -p "${root}/run"
}

# link_bin SRC DST: DST is SRC, hard-linked when possible (as in
# distroless_rootfs: the binaries are tens of MB).
link_bin() {
  mkdir -p "$(dirname -- "$2")"
  ln -f "$1" "$2" 2>/dev/null || cp -f "$1" "$2"
}

# addon_kube_proxy: kube-proxy in /usr/local/bin (as upstream; kubeadm's
# DaemonSet runs /usr/local/bin/kube-proxy) on the distroless base, plus the
# netfilter tools.
addon_kube_proxy() {
  local out="${ADDON_IMAGES}/kube-proxy.tar" bin="${BIN}/kube-proxy"
  local root="${WORK}/addons/kube-proxy/rootfs"
  need_bin "${bin}"
  stale "${out}" "${bin}" "${SCRIPT}" "${HACK}/ocibuild" || host_stale "${out}" "${root}.host-files" || return 0
  distroless_rootfs "${root}" "${bin}"
  netfilter_tools "${root}"
  ocibuild -rootfs "${root}" -name "registry.k8s.io/kube-proxy:${K8S_VERSION}" -o "${out}" \
    -entrypoint '["/usr/local/bin/kube-proxy"]' -env "${PATH_ENV}" -gzip-level 6 >&2
  rm -rf "${root}"
  ADDONS_BUILT=$((ADDONS_BUILT + 1))
}

# addon_flannel: flanneld and install-conf in /opt/bin as upstream (the
# DaemonSet's init container runs /opt/bin/install-conf to write the CNI
# config, so no shell is needed), plus the netfilter tools. Upstream's is
# Alpine-based; this one is the distroless base.
addon_flannel() {
  local out="${ADDON_IMAGES}/flannel.tar" root="${WORK}/addons/flannel/rootfs"
  local bins=("${BIN}/flanneld" "${BIN}/flannel-install-conf")
  need_bin "${bins[@]}"
  stale "${out}" "${bins[@]}" "${SCRIPT}" "${HACK}/ocibuild" || host_stale "${out}" "${root}.host-files" || return 0
  distroless_rootfs "${root}"
  link_bin "${bins[0]}" "${root}/opt/bin/flanneld"
  link_bin "${bins[1]}" "${root}/opt/bin/install-conf"
  netfilter_tools "${root}"
  ocibuild -rootfs "${root}" -name "ghcr.io/flannel-io/flannel:${FLANNEL_VERSION}" -o "${out}" \
    -entrypoint '["/opt/bin/flanneld"]' -env "${PATH_ENV}" -gzip-level 6 >&2
  rm -rf "${root}"
  ADDONS_BUILT=$((ADDONS_BUILT + 1))
}

# addon_flannel_cni_plugin: the static flannel CNI plugin as /flannel on the
# busybox rootfs: the DaemonSet's init container runs
# `cp -f /flannel /opt/cni/bin/flannel`. Tagged with the version of the
# containernetworking/plugins code it is built from (upstream's manifests
# name flannel-io/cni-plugin tags such as v1.9.1-flannel3, not served by the
# module proxy).
addon_flannel_cni_plugin() {
  local out="${ADDON_IMAGES}/flannel-cni-plugin.tar" bin="${CNI_BIN}/flannel"
  need_bin "${bin}"
  ensure_apt busybox-static
  stale "${out}" "${bin}" /bin/busybox "${SCRIPT}" "${HACK}/ocibuild" || return 0
  local root="${WORK}/addons/flannel-cni-plugin/rootfs"
  busybox_rootfs "${root}"
  link_bin "${bin}" "${root}/flannel"
  ocibuild -rootfs "${root}" -name "ghcr.io/flannel-io/flannel-cni-plugin:${CNI_FLANNEL_VERSION}" -o "${out}" \
    -cmd '["sh"]' -env "${PATH_ENV}" >&2
  rm -rf "${root}"
  ADDONS_BUILT=$((ADDONS_BUILT + 1))
}

# addon_coredns: /coredns on the distroless base, as upstream: User
# nonroot (65532) and the file capability cap_net_bind_service, without which
# a non-root coredns cannot bind port 53 (kubeadm's Deployment adds
# NET_BIND_SERVICE and sets allowPrivilegeEscalation: false; the capability
# survives exec only as a file capability). A copy, not a hard link: setcap
# would write the xattr into _output/bin/coredns.
addon_coredns() {
  local out="${ADDON_IMAGES}/coredns.tar" bin="${BIN}/coredns"
  need_bin "${bin}"
  ensure_apt libcap2-bin
  stale "${out}" "${bin}" "${SCRIPT}" "${HACK}/ocibuild" || return 0
  local root="${WORK}/addons/coredns/rootfs"
  distroless_rootfs "${root}"
  cp -f "${bin}" "${root}/coredns"
  setcap cap_net_bind_service=+ep "${root}/coredns"
  ocibuild -rootfs "${root}" -name "registry.k8s.io/coredns/coredns:${COREDNS_VERSION}" -o "${out}" \
    -entrypoint '["/coredns"]' -user 65532:65532 -expose 53/tcp -expose 53/udp \
    -env "${PATH_ENV}" -gzip-level 6 >&2
  rm -rf "${root}"
  ADDONS_BUILT=$((ADDONS_BUILT + 1))
}

# build_addons: each addon_* builds its archive when stale and counts it.
# They are not called as `if` conditions, which would switch off errexit in
# them (a failed setcap or ocibuild would pass unnoticed).
ADDONS_BUILT=0
build_addons() {
  local a
  for a in kube_proxy flannel flannel_cni_plugin coredns; do
    "addon_${a}"
  done
  [[ ${ADDONS_BUILT} -gt 0 ]] || echo "skip"
}

# build_target: the archives of a --target version, all in TARGET_IMAGES:
# build_control-plane's (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd), the kubelet's (its binary on the
# distroless base, Entrypoint /usr/local/bin/kubelet: a carrier, so that
# `bootlet images import DIR` hands a node the whole version; it runs on the
# host, not from this image), and the add-ons kube-proxy and CoreDNS.
# flannel is not versioned with Kubernetes and stays addons/flannel*.tar.
build_target() {
  local built=0 r
  r="$(build_control-plane | tail -n 1)"
  [[ "${r}" == skip ]] || built=1
  if cp_image kubelet "${KUBELET_IMAGE}:${K8S_VERSION}" /usr/local/bin/kubelet "${BIN}/kubelet"; then built=1; fi
  addon_kube_proxy
  addon_coredns
  [[ ${built} -eq 1 || ${ADDONS_BUILT} -gt 0 ]] || echo "skip"
}

# --- conformance images --------------------------------------------------------
# The images the upstream [Conformance] tests of e2e.test run, under the names
# and tags of k8s.io/kubernetes@v1.36.3/test/utils/image/manifest.go (what
# `e2e.test --list-images` prints; with --target, that version's: the *_TAG
# variables above), so that with them imported nothing is pulled. Contents
# follow each image's test/images/<name>/Dockerfile where the tests depend on
# it; see hack/README.md for what each holds and what is left out.
E2E_REGISTRY=registry.k8s.io/e2e-test-images
CONF_WORK="${WORK}/conformance"
# The Debian packages downloaded and the busybox built from source are the
# same for every version: one copy, in the current version's scratch space.
CONF_CACHE="${OUT}/build/images/conformance"
# The binaries `hack/toolchain.sh --conformance` builds into _output/bin
# (with --target, _output/versions/VERSION/bin).
CONF_BINS=(agnhost nnp sample-apiserver)
# Debian packages whose C tools agnhost and glibc-dns-testing carry (Alpine's
# bind-tools, curl, netcat-openbsd, iproute2, bash, util-linux in upstream's).
CONF_APT=(bind9-dnsutils curl netcat-openbsd iproute2 bash util-linux libc-bin)
# The host tools copied into agnhost (to /usr/bin, ahead of busybox in PATH).
AGNHOST_TOOLS=(curl nc dig nslookup host ip ss bash ipcs getent)

# k8s_module_dir: where k8s.io/kubernetes@v1.36.3 sits in the module cache
# (hack/tools/kubernetes pins it; with --target, the version's
# hack/tools/versions/VERSION/kubernetes): the images take their data files
# (porter's certificates, kitten's and nautilus's pictures) from its
# test/images.
k8s_module_dir() {
  (cd "${CONF_K8S_MOD}" && GOTOOLCHAIN="${CONF_GOTOOLCHAIN}" go list -m -f '{{.Dir}}' k8s.io/kubernetes)
}

# host_closure FILE...: prints FILE (symlinks resolved) and the path of every
# shared library ldd resolves for it, the ELF interpreter included, as ldd
# names them (the soname, e.g. libcurl.so.4, a link to libcurl.so.4.8.0);
# dies when a library is not found. What a dynamically linked Debian binary
# needs to run in a rootfs with no libc of its own.
host_closure() {
  local f real line
  for f in "$@"; do
    real="$(readlink -f "${f}")"
    [[ -x "${real}" ]] || die "host_closure: ${f} is not an executable"
    echo "${real}"
    ldd "${real}" 2>/dev/null | grep -q 'not a dynamic executable' && continue
    while read -r line; do
      case "${line}" in
        *"not found"*) die "host_closure: ${f}: ${line}" ;;
        *"=> /"*) line="${line#*=> }"; echo "${line%% (*}" ;;
        /*) echo "${line%% (*}" ;;
      esac
    done < <(ldd "${real}")
  done | sort -u
}

# host_bins ROOT NAME...: copies the host commands NAME (looked up in PATH,
# symlinks resolved: nc is /usr/bin/nc.openbsd) to ROOT/usr/bin/NAME, with
# their libraries (host_libs).
host_bins() {
  local root="$1" n path; shift
  for n in "$@"; do
    path="$(command -v "${n}")" || die "host_bins: ${n} is not installed"
    install -D -m 0755 "$(readlink -f "${path}")" "${root}/usr/bin/${n}"
    host_libs "${root}" "${path}"
  done
}

# host_libs ROOT FILE: copies the shared libraries of the executable FILE
# (host_closure) into ROOT (copy_lib). No ld.so.cache is needed: they land in
# the loader's default directories.
host_libs() {
  local root="$1" real files f
  real="$(readlink -f "$2")"
  files="$(host_closure "$2")" || exit 1
  while IFS= read -r f; do
    [[ "${f}" == "${real}" ]] || copy_lib "${root}" "${f}"
  done <<< "${files}"
}

# copy_lib ROOT LIB: the content of LIB (links followed) at the path the
# loader looks for it: ldd's path, with /usr/lib/x86_64-linux-gnu folded
# into /lib/x86_64-linux-gnu (one of the loader's default directories; this
# host has a merged /usr, the rootfs does not), the interpreter at /lib64.
copy_lib() {
  local root="$1" lib="$2" dst
  dst="${lib}"
  case "${lib}" in
    /usr/lib/x86_64-linux-gnu/*) dst="/lib/x86_64-linux-gnu/${lib#/usr/lib/x86_64-linux-gnu/}" ;;
  esac
  install -D -m 0755 "${lib}" "${root}${dst}"
}

# host_inputs NAME...: the host files (binaries and libraries) the images
# copy for the commands NAME, as inputs of `stale`.
host_inputs() {
  local n p paths=()
  for n in "$@"; do
    p="$(command -v "${n}")" || die "${n} is not installed"
    paths+=("${p}")
  done
  host_closure "${paths[@]}"
}

# deb_unpack DIR PKG...: downloads the current Debian packages PKG into
# DIR/debs and unpacks them into DIR/root with dpkg-deb -x: their files
# without installing them, so nginx's maintainer scripts never start a server
# on this host's port 80. Reuses a .deb already downloaded (same version).
deb_unpack() {
  local dir="$1" p v deb; shift
  mkdir -p "${dir}/debs" "${dir}/root"
  for p in "$@"; do
    v="$(apt-cache policy "${p}" 2>/dev/null | awk '/Candidate:/ {print $2}')"
    if [[ -z "${v}" || "${v}" == "(none)" ]]; then
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq
      v="$(apt-cache policy "${p}" | awk '/Candidate:/ {print $2}')"
    fi
    [[ -n "${v}" && "${v}" != "(none)" ]] || die "deb_unpack: no Debian package ${p}"
    deb="$(find "${dir}/debs" -name "${p}_*${v#*:}_*.deb" -print -quit)"
    if [[ -z "${deb}" ]]; then
      (cd "${dir}/debs" && apt-get -o APT::Sandbox::User=root -qq download "${p}=${v}") >&2
      deb="$(find "${dir}/debs" -name "${p}_*${v#*:}_*.deb" -print -quit)"
      [[ -n "${deb}" ]] || die "deb_unpack: apt-get download ${p}=${v} left no .deb"
    fi
    # Once per .deb: a marker in DIR records what root holds.
    [[ -f "${dir}/unpacked/$(basename "${deb}")" ]] && continue
    dpkg-deb -x "${deb}" "${dir}/root"
    mkdir -p "${dir}/unpacked" && touch "${dir}/unpacked/$(basename "${deb}")"
  done
}

# conf_ocibuild OUT REF ROOT OCIBUILD-FLAG...: packs ROOT into the archive OUT
# as REF (gzip level 6, as the control-plane images: agnhost is ~60 MB).
conf_ocibuild() {
  local out="$1" ref="$2" root="$3"; shift 3
  ocibuild -rootfs "${root}" -name "${ref}" -o "${out}" -env "${PATH_ENV}" -gzip-level 6 "$@" >&2
}

# dyn_busybox_rootfs ROOT: busybox_rootfs with Debian's dynamically linked
# busybox (package busybox, unpacked, not installed: it conflicts with
# busybox-static) and its libraries. The static build prefers its applets
# over PATH (FEATURE_SH_STANDALONE): its `sh -c "nc ..."` would run busybox's
# nc, ip, nslookup, wget instead of Debian's in /usr/bin. This one looks them
# up in PATH, as Alpine's busybox sh does in upstream's images.
BUSYBOX_DEB_DIR="${CONF_CACHE}/busybox-deb"
dyn_busybox_rootfs() {
  local bb="${BUSYBOX_DEB_DIR}/root/bin/busybox"
  [[ -x "${bb}" ]] || die "dyn_busybox_rootfs: ${bb} is missing (deb_unpack busybox)"
  busybox_rootfs "$1" "${bb}"
  host_libs "$1" "${bb}"
}

# agnhost_rootfs ROOT: test/images/agnhost/Dockerfile on a busybox rootfs
# (upstream's is Alpine, whose /bin is busybox too): /agnhost and the
# /agnhost-2 link (entrypoint-tester tests), /uploads (netexec), porter's
# localhost.crt/.key, the image's user-defined-in-image (1000) in
# group-defined-in-image (50000), and the C tools the tests exec in agnhost
# pods (curl, nc, dig/nslookup/host, ip, ss, bash, ipcs; getent for glibc's
# resolver). Left out: iperf (no Conformance test runs it), CoreDNS 1.6.2 and
# /var/registry (downloads at upstream's build time; only non-Conformance DNS
# and image-pull tests use them).
agnhost_rootfs() {
  local root="$1" src="$2"
  dyn_busybox_rootfs "${root}"
  host_bins "${root}" "${AGNHOST_TOOLS[@]}"
  install -m 0755 "${BIN}/agnhost" "${root}/agnhost"
  ln -s agnhost "${root}/agnhost-2"
  mkdir -p "${root}/uploads"
  install -m 0644 "${src}/test/images/agnhost/porter/localhost.crt" "${src}/test/images/agnhost/porter/localhost.key" "${root}/"
  cat >> "${root}/etc/passwd" <<'PASSWD'
user-defined-in-image:x:1000:1000:Linux User,,,:/home/user-defined-in-image:/bin/sh
PASSWD
  cat >> "${root}/etc/group" <<'GROUP'
user-defined-in-image:x:1000:
group-defined-in-image:x:50000:user-defined-in-image
GROUP
  mkdir -p "${root}/home/user-defined-in-image"
  echo 'hosts: files dns' > "${root}/etc/nsswitch.conf"
}

AGNHOST_FLAGS=(-entrypoint '["/agnhost"]' -cmd '["pause"]'
  -expose 80/tcp -expose 8080/tcp -expose 8081/tcp -expose 9376/tcp -expose 5000/tcp)

# conf_agnhost: agnhost:2.63.0 (imageutils.Agnhost; AGNHOST_TAG) and the same
# rootfs as agnhost:2.55 (AgnhostPrev, which tests use as "the image before an
# update"), kitten:1.8 and nautilus:1.8 (agnhost + a picture and data.json,
# Cmd test-webserver: kubectl's update-demo and the image-volume test).
# 2.55 carries a label so its digest differs from 2.63.0's: two tags of one
# image would make the runtime report either name in container statuses.
conf_agnhost() {
  local src inputs root="${CONF_WORK}/agnhost/rootfs" n
  mapfile -t inputs < <(host_inputs "${AGNHOST_TOOLS[@]}")
  inputs+=("${BUSYBOX_DEB_DIR}/debs")
  local outs=("${CONF_IMAGES}/agnhost.tar" "${CONF_IMAGES}/agnhost-prev.tar"
    "${CONF_IMAGES}/kitten.tar" "${CONF_IMAGES}/nautilus.tar")
  local stale_any=0 o
  for o in "${outs[@]}"; do
    if stale "${o}" "${BIN}/agnhost" "${inputs[@]}" /bin/busybox "${SCRIPT}" "${HACK}/ocibuild"; then stale_any=1; fi
  done
  [[ ${stale_any} -eq 1 ]] || return 1
  src="$(k8s_module_dir)" || die "k8s.io/kubernetes is not in the module cache"
  agnhost_rootfs "${root}" "${src}"
  conf_ocibuild "${outs[0]}" "${E2E_REGISTRY}/agnhost:${AGNHOST_TAG}" "${root}" "${AGNHOST_FLAGS[@]}"
  conf_ocibuild "${outs[1]}" "${E2E_REGISTRY}/agnhost:2.55" "${root}" "${AGNHOST_FLAGS[@]}" \
    -label bootlet.dev/upstream-tag=2.55
  for n in kitten nautilus; do
    # A hardlinked copy: the rootfs is ~100 MB and only two files differ.
    rm -rf "${CONF_WORK:?}/${n}"; mkdir -p "${CONF_WORK}/${n}"
    cp -al "${root}" "${CONF_WORK}/${n}/rootfs"
    install -m 0644 "${src}/test/images/${n}/html/${n}.jpg" "${src}/test/images/${n}/html/data.json" \
      "${CONF_WORK}/${n}/rootfs/"
    conf_ocibuild "${CONF_IMAGES}/${n}.tar" "${E2E_REGISTRY}/${n}:1.8" "${CONF_WORK}/${n}/rootfs" \
      -entrypoint '["/agnhost"]' -cmd '["test-webserver"]' -expose 80/tcp
    rm -rf "${CONF_WORK:?}/${n}"
  done
  rm -rf "${root}"
}

# conf_simple NAME REF INPUT... -- SETUP OCIBUILD-FLAG...: one image: returns
# 1 when up to date, else runs the function SETUP ROOT, which makes the rootfs
# (from busybox_rootfs), and packs it.
conf_simple() {
  local name="$1" ref="$2"; shift 2
  local inputs=()
  while [[ "$1" != -- ]]; do inputs+=("$1"); shift; done
  shift
  local setup="$1"; shift
  local out="${CONF_IMAGES}/${name}.tar" root="${CONF_WORK}/${name}/rootfs"
  stale "${out}" "${inputs[@]}" /bin/busybox "${SCRIPT}" "${HACK}/ocibuild" || return 1
  "${setup}" "${root}"
  conf_ocibuild "${out}" "${ref}" "${root}" "$@"
  rm -rf "${root}"
}

# busybox:1.37.0-1 (CONF_BUSYBOX_TAG) is upstream's busybox image retagged:
# a busybox rootfs, Cmd sh, whose busybox is Debian's busybox-static rebuilt
# from its source package with one switch of Debian's own turned on
# (busybox_env_build).
setup_busybox() { busybox_rootfs "$1" "${BUSYBOX_ENV_BIN}"; }

# busybox_env_build: Debian's busybox source package (apt-get source, the
# host's suites as deb-src in a private apt state and cache under CONF_CACHE,
# so the host's apt lists and caches are untouched), Debian's patch series applied in
# order, Debian's static config with CONFIG_FEATURE_DI_ENV_HACK=y, built into
# BUSYBOX_ENV_BIN. Why: Debian reverts upstream's 9c143ce52 (ash keeps
# environment variables whose names are not shell identifiers, since 1.28)
# and keeps the old behaviour behind that switch, which only its installer
# build turns on. The envFrom Conformance specs run `sh -c env` in this image
# and look for data-1=value-1 and p-data-1=...: Debian's ash drops them,
# upstream's (and this build's) keeps them. Everything else is Debian's
# busybox-static, so the read-only-rootfs spec still sees ash's own message.
# Skipped when BUSYBOX_ENV_BIN is newer than the source package and this
# script; about 2 min of compiling on 2 idle cores.
BUSYBOX_ENV_DIR="${CONF_CACHE}/busybox-env"
BUSYBOX_ENV_BIN="${BUSYBOX_ENV_DIR}/busybox"
busybox_env_build() {
  local dir="${BUSYBOX_ENV_DIR}" apt_opts dsc src f
  ensure_apt gcc make libc6-dev patch bzip2 xz-utils
  mkdir -p "${dir}/apt/lists/partial" "${dir}/apt/cache/archives/partial" "${dir}/apt/sources.list.d" "${dir}/pkg"
  # deb-src twins of the host's deb sources (one-line and deb822 files).
  : > "${dir}/apt/sources.list"
  [[ -f /etc/apt/sources.list ]] && sed -n 's/^deb /deb-src /p' /etc/apt/sources.list >> "${dir}/apt/sources.list"
  for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -f "${f}" ]] || continue
    case "${f}" in
      *.list) sed -n 's/^deb /deb-src /p' "${f}" >> "${dir}/apt/sources.list" ;;
      *.sources) sed 's/^Types:.*/Types: deb-src/' "${f}" > "${dir}/apt/sources.list.d/$(basename "${f}")" ;;
    esac
  done
  apt_opts=(-o "Dir::Etc::SourceList=${dir}/apt/sources.list" -o "Dir::Etc::SourceParts=${dir}/apt/sources.list.d"
    -o "Dir::State::Lists=${dir}/apt/lists" -o "Dir::Cache=${dir}/apt/cache" -o APT::Sandbox::User=root -o DPkg::Lock::Timeout=300)
  dsc="$(find "${dir}/pkg" -maxdepth 1 -name 'busybox_*.dsc' -print -quit)"
  if [[ -z "${dsc}" ]]; then
    apt-get "${apt_opts[@]}" update -qq >&2
    (cd "${dir}/pkg" && apt-get "${apt_opts[@]}" -qq source --download-only busybox) >&2
    dsc="$(find "${dir}/pkg" -maxdepth 1 -name 'busybox_*.dsc' -print -quit)"
    [[ -n "${dsc}" ]] || die "busybox_env_build: apt-get source busybox left no .dsc in ${dir}/pkg"
  fi
  stale "${BUSYBOX_ENV_BIN}" "${dsc}" "${SCRIPT}" || return 0
  local orig debian
  orig="$(find "${dir}/pkg" -maxdepth 1 -name 'busybox_*.orig.tar.bz2' -print -quit)"
  debian="$(find "${dir}/pkg" -maxdepth 1 -name 'busybox_*.debian.tar.xz' -print -quit)"
  [[ -n "${orig}" && -n "${debian}" ]] \
    || die "busybox_env_build: ${dir}/pkg lacks the .orig.tar.bz2 or .debian.tar.xz of ${dsc##*/}: remove ${dir}/pkg and run again"
  src="${dir}/src"
  rm -rf "${src}" && mkdir -p "${src}"
  tar -xjf "${orig}" -C "${src}" --strip-components=1
  tar -xJf "${debian}" -C "${src}"
  while read -r f; do
    [[ -z "${f}" || "${f}" == \#* ]] && continue
    patch -d "${src}" -p1 -s < "${src}/debian/patches/${f}" || die "busybox_env_build: Debian's ${f} does not apply"
  done < "${src}/debian/patches/series"
  grep -qx '# CONFIG_FEATURE_DI_ENV_HACK is not set' "${src}/debian/config/pkg/static" \
    || die "busybox_env_build: Debian's static config no longer has CONFIG_FEATURE_DI_ENV_HACK"
  sed 's/^# CONFIG_FEATURE_DI_ENV_HACK is not set$/CONFIG_FEATURE_DI_ENV_HACK=y/' \
    "${src}/debian/config/pkg/static" > "${src}/.config"
  (cd "${src}" && { yes '' || true; } | make oldconfig >/dev/null && make -j"$(nproc)" busybox >/dev/null) \
    || die "busybox_env_build: make failed in ${src}"
  install -m 0755 "${src}/busybox" "${BUSYBOX_ENV_BIN}"
  rm -rf "${src}"
}

# nonewprivs:1.4: /usr/local/bin/nnp (prints its effective uid) setuid root,
# Cmd nnp: the allowPrivilegeEscalation tests run it as uid 1000.
setup_nonewprivs() {
  busybox_rootfs "$1"
  install -D -m 4755 "${BIN}/nnp" "$1/usr/local/bin/nnp"
}

# nonroot:1.5: upstream is debian-base with USER 1234; the runAsNonRoot
# tests exec `id -u` in it.
setup_nonroot() { busybox_rootfs "$1"; }

# sample-apiserver:1.29.2: /sample-apiserver from k8s.io/sample-apiserver at
# the staging version of v1.36.3, or of the --target version (the aggregator
# test passes it the etcd, TLS and audit flags that version has), Entrypoint
# /sample-apiserver. The tag is the same at v1.37.2.
setup_sample_apiserver() {
  busybox_rootfs "$1"
  install -m 0755 "${BIN}/sample-apiserver" "$1/sample-apiserver"
}

# glibc-dns-testing:2.0.0 (CONF_GLIBC_DNS_TAG; the DNS tests' "jessie", at
# v1.37 "glibc", prober): Debian's dig, nslookup, host and glibc's getent,
# which the probe loop runs with sh, seq and test from busybox (the dynamic
# one, as in agnhost: `dig` must not be shadowed). Upstream also ships CoreDNS
# 1.5.0, which no test in the Conformance set starts.
setup_glibc_dns_testing() {
  dyn_busybox_rootfs "$1"
  host_bins "$1" dig nslookup host getent
  echo 'hosts: files dns' > "$1/etc/nsswitch.conf"
}

# nginx:1.15-4 (CONF_NGINX_TAG): Debian's nginx (upstream's is nginx:alpine):
# the binary and its libraries, mime.types and the default index.html from
# nginx-common, a minimal nginx.conf serving /usr/share/nginx/html on port 80
# with workers as user nginx (101, as upstream), logs to stdout/stderr as
# upstream, Cmd `nginx -g 'daemon off;'`.
NGINX_DIR="${CONF_CACHE}/nginx-deb"
setup_nginx() {
  local root="$1" x="${NGINX_DIR}/root"
  busybox_rootfs "${root}"
  install -D -m 0755 "${x}/usr/sbin/nginx" "${root}/usr/sbin/nginx"
  host_libs "${root}" "${x}/usr/sbin/nginx"
  install -D -m 0644 "${x}/etc/nginx/mime.types" "${root}/etc/nginx/mime.types"
  install -D -m 0644 "${x}/usr/share/nginx/html/index.html" "${root}/usr/share/nginx/html/index.html"
  mkdir -p "${root}"/{run,var/lib/nginx,var/log/nginx,var/lock}
  ln -sf /dev/stdout "${root}/var/log/nginx/access.log"
  ln -sf /dev/stderr "${root}/var/log/nginx/error.log"
  echo 'nginx:x:101:101:nginx:/var/lib/nginx:/sbin/nologin' >> "${root}/etc/passwd"
  echo 'nginx:x:101:' >> "${root}/etc/group"
  cat > "${root}/etc/nginx/nginx.conf" <<'CONF'
user nginx;
worker_processes auto;
error_log /var/log/nginx/error.log notice;
pid /run/nginx.pid;

events {
    worker_connections 1024;
}

http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log /var/log/nginx/access.log;
    sendfile on;
    keepalive_timeout 65;

    server {
        listen 80;
        listen [::]:80;
        server_name localhost;
        location / {
            root /usr/share/nginx/html;
            index index.html index.htm;
        }
    }
}
CONF
}

# pause:3.10.2 (imageutils.GetPauseImageName; the sandbox image stays
# 3.10.1): pause.c as pause.tar, User 65535.
setup_pause() {
  busybox_rootfs "$1"
  command -v gcc >/dev/null || ensure_apt gcc libc6-dev
  gcc -static -Os -Wall -o "$1/pause" "${HACK}/images/pause/pause.c"
  strip "$1/pause"
}

# build_conformance: every conformance image; prints "skip" when all are up
# to date. Fails, naming it, when a binary of `toolchain.sh --conformance`
# is missing.
build_conformance() {
  local b built=0
  for b in "${CONF_BINS[@]}"; do
    [[ -x "${BIN}/${b}" ]] || { echo "${BIN}/${b} is missing: run ${CONF_HINT} first" >&2; exit 1; }
  done
  ensure_apt busybox-static "${CONF_APT[@]}"
  mkdir -p "${CONF_IMAGES}" "${CONF_WORK}"
  deb_unpack "${BUSYBOX_DEB_DIR}" busybox
  if conf_agnhost; then built=1; fi
  busybox_env_build
  if conf_simple busybox "${E2E_REGISTRY}/busybox:${CONF_BUSYBOX_TAG}" "${BUSYBOX_ENV_BIN}" -- setup_busybox -cmd '["sh"]'; then built=1; fi
  if conf_simple pause registry.k8s.io/pause:3.10.2 "${HACK}/images/pause/pause.c" -- setup_pause \
    -entrypoint '["/pause"]' -user 65535:65535; then built=1; fi
  if conf_simple nonewprivs "${E2E_REGISTRY}/nonewprivs:1.4" "${BIN}/nnp" -- setup_nonewprivs \
    -cmd '["nnp"]'; then built=1; fi
  if conf_simple nonroot "${E2E_REGISTRY}/nonroot:1.5" -- setup_nonroot -user 1234 -cmd '["sh"]'; then built=1; fi
  if conf_simple sample-apiserver "${E2E_REGISTRY}/sample-apiserver:1.29.2" "${BIN}/sample-apiserver" -- \
    setup_sample_apiserver -entrypoint '["/sample-apiserver"]'; then built=1; fi
  local dns_inputs ngx_inputs
  mapfile -t dns_inputs < <(host_inputs dig nslookup host getent)
  if conf_simple glibc-dns-testing "${E2E_REGISTRY}/glibc-dns-testing:${CONF_GLIBC_DNS_TAG}" "${dns_inputs[@]}" \
    "${BUSYBOX_DEB_DIR}/debs" -- \
    setup_glibc_dns_testing -cmd '["sh"]'; then built=1; fi
  deb_unpack "${NGINX_DIR}" nginx nginx-common
  mapfile -t ngx_inputs < <(find "${NGINX_DIR}/debs" -name '*.deb')
  if conf_simple nginx "${E2E_REGISTRY}/nginx:${CONF_NGINX_TAG}" "${ngx_inputs[@]}" -- setup_nginx \
    -cmd '["nginx", "-g", "daemon off;"]' -expose 80/tcp; then built=1; fi
  [[ ${built} -eq 1 ]] || echo "skip"
}

TOTAL_START=$(now)
for img in "${WANT[@]}"; do
  start=$(now)
  # set -e again: bash clears errexit in a command substitution, and a failed
  # step (gcc, setcap, ocibuild) must fail the build, not report it built.
  result="$(set -e; build_"${img}" | tail -n 1)"
  status=built; [[ "${result}" == skip ]] && status=up-to-date
  path="${IMAGES#"${REPO_ROOT}"/}/${img}.tar"
  [[ "${img}" == control-plane ]] && path="${CP_IMAGES#"${REPO_ROOT}"/}/*.tar"
  [[ "${img}" == addons ]] && path="${ADDON_IMAGES#"${REPO_ROOT}"/}/*.tar"
  [[ "${img}" == conformance ]] && path="${CONF_IMAGES#"${REPO_ROOT}"/}/*.tar"
  [[ "${img}" == target ]] && path="${TARGET_IMAGES#"${REPO_ROOT}"/}/*.tar"
  printf '%-28s %-12s %6ss  %s\n' "image/${img}" "${status}" "$(elapsed "${start}" "$(now)")" "${path}"
done
printf '%-28s %-12s %6ss\n' images total "$(elapsed "${TOTAL_START}" "$(now)")"
