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
#
# Usage: hack/images.sh [--force] [pause|busybox|testserver|control-plane|addons ...]
#
# An archive is rebuilt only when one of its inputs is newer than it.
# Import with: _output/bin/ctr -n k8s.io --address SOCK images import FILE
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
go_reproducible

IMAGES="${OUT}/images"
CP_IMAGES="${IMAGES}/control-plane"
ADDON_IMAGES="${IMAGES}/addons"
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

FORCE=0
WANT=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    pause|busybox|testserver|control-plane|addons) WANT+=("$1") ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
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

# busybox_rootfs DIR: Debian's static busybox with applet symlinks in /bin.
busybox_rootfs() {
  local root="$1"
  # An empty root would write /etc/hosts, /etc/resolv.conf, ... of this host.
  [[ "${root}" == "${WORK}"/* ]] || die "busybox_rootfs: refusing root '${root}' outside ${WORK}"
  rm -rf "${root}"
  mkdir -p "${root}"/{bin,etc,tmp,root,home,var/tmp,usr/bin,usr/sbin,sbin}
  chmod 1777 "${root}/tmp" "${root}/var/tmp"
  chmod 0700 "${root}/root"
  install -m 0755 /bin/busybox "${root}/bin/busybox"
  local a
  for a in $(/bin/busybox --list); do
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
    [[ -x "${b}" ]] || { echo "${b} is missing: run hack/toolchain.sh --control-plane first" >&2; exit 1; }
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
    [[ -x "${b}" ]] || { echo "${b} is missing: run hack/toolchain.sh --addons first" >&2; exit 1; }
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
  printf '%-28s %-12s %6ss  %s\n' "image/${img}" "${status}" "$(elapsed "${start}" "$(now)")" "${path}"
done
printf '%-28s %-12s %6ss\n' images total "$(elapsed "${TOTAL_START}" "$(now)")"
