#!/usr/bin/env bash
# Builds OCI image layout archives into _output/images/ without docker:
#   pause.tar       registry.k8s.io/pause:3.10.1      (static C pause, /pause)
#   busybox.tar     docker.io/library/busybox:1.36     (Debian busybox-static)
#   testserver.tar  bootlet.dev/testserver:1           (Go test server + busybox)
#
# Usage: hack/images.sh [--force] [pause|busybox|testserver ...]
#
# An archive is rebuilt only when one of its inputs is newer than it.
# Import with: _output/bin/ctr -n k8s.io --address SOCK images import FILE
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HACK="${REPO_ROOT}/hack"
OUT="${REPO_ROOT}/_output"
IMAGES="${OUT}/images"
WORK="${OUT}/build/images"
OCIBUILD="${OUT}/tools/ocibuild"
SCRIPT="${HACK}/images.sh"

export GOFLAGS="-mod=readonly -buildvcs=false"
export GOWORK=off
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-0}"

PATH_ENV="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

FORCE=0
WANT=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    pause|busybox|testserver) WANT+=("$1") ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
[[ ${#WANT[@]} -gt 0 ]] || WANT=(pause busybox testserver)

mkdir -p "${IMAGES}" "${WORK}" "$(dirname "${OCIBUILD}")"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# stale OUTPUT INPUT... : true when OUTPUT is missing or older than any input.
stale() {
  local out="$1"; shift
  [[ ${FORCE} -eq 1 || ! -e "${out}" ]] && return 0
  [[ -n "$(find "$@" -newer "${out}" -print -quit 2>/dev/null)" ]]
}

ensure_apt() { "$(dirname "${BASH_SOURCE[0]}")/deps.sh" "$@"; }

ocibuild() {
  if stale "${OCIBUILD}" "${HACK}/ocibuild"; then
    (cd "${HACK}/ocibuild" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "${OCIBUILD}" .)
  fi
  "${OCIBUILD}" "$@"
}

# busybox_rootfs DIR: Debian's static busybox with applet symlinks in /bin.
busybox_rootfs() {
  local root="$1"
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

TOTAL_START=$(now)
for img in "${WANT[@]}"; do
  start=$(now)
  result="$(build_"${img}" | tail -n 1)"
  status=built; [[ "${result}" == skip ]] && status=up-to-date
  printf '%-28s %-12s %6ss  %s\n' "image/${img}" "${status}" "$(elapsed "${start}" "$(now)")" \
    "${IMAGES#"${REPO_ROOT}"/}/${img}.tar"
done
printf '%-28s %-12s %6ss\n' images total "$(elapsed "${TOTAL_START}" "$(now)")"
