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
# They sit in a subdirectory so that importing _output/images (every e2e
# test's containerd does) stays cheap; only the control plane imports them.
#
# Usage: hack/images.sh [--force] [pause|busybox|testserver|control-plane ...]
#
# An archive is rebuilt only when one of its inputs is newer than it.
# Import with: _output/bin/ctr -n k8s.io --address SOCK images import FILE
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
go_reproducible

IMAGES="${OUT}/images"
CP_IMAGES="${IMAGES}/control-plane"
K8S_VERSION=v1.36.3
ETCD_IMAGE_TAG=3.6.8-0
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
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    pause|busybox|testserver|control-plane) WANT+=("$1") ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
[[ ${#WANT[@]} -gt 0 ]] || WANT=(pause busybox testserver control-plane)

mkdir -p "${IMAGES}" "${CP_IMAGES}" "${WORK}" "$(dirname "${OCIBUILD}")"

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

TOTAL_START=$(now)
for img in "${WANT[@]}"; do
  start=$(now)
  result="$(build_"${img}" | tail -n 1)"
  status=built; [[ "${result}" == skip ]] && status=up-to-date
  path="${IMAGES#"${REPO_ROOT}"/}/${img}.tar"
  [[ "${img}" == control-plane ]] && path="${CP_IMAGES#"${REPO_ROOT}"/}/*.tar"
  printf '%-28s %-12s %6ss  %s\n' "image/${img}" "${status}" "$(elapsed "${start}" "$(now)")" "${path}"
done
printf '%-28s %-12s %6ss\n' images total "$(elapsed "${TOTAL_START}" "$(now)")"
