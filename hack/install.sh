#!/usr/bin/env bash
# `make install`: puts the node's binaries, systemd units and default config
# where an OS image expects them (dist/systemd/README.md). It starts,
# enables and stops nothing, and needs root only for the real paths: with
# DESTDIR it writes nothing outside DESTDIR, sets no owner, and never talks
# to systemd.
#
#   hack/install.sh --out DIR [--destdir DIR] [--prefix /usr/local] [--unitdir DIR] [--images]
#
#   PREFIX/bin/                     bootlet, bootlet-tools (bootlet runs the bootlet-tools beside it)
#   PREFIX/libexec/bootlet/         containerd, containerd-shim-runc-v2, runc, ctr, kubelet: private,
#                                   out of PATH, so no system containerd, runc or kubelet is replaced
#   PREFIX/libexec/bootlet/cni/     bridge, host-local, loopback, portmap
#   PREFIX/share/bootlet/images/    bootlet's --preload-images (with --images: pause and the
#                                   control-plane and add-on archives of `make images`)
#   UNITDIR/                        bootlet-containerd.service, bootlet.service, bootlet-kubelet.service,
#                                   bootlet-kubelet-worker.service, bootlet-upgrade-agent.service and
#                                   bootlet-worker.service (a worker's kubelet, upgrade agent and
#                                   daemon, docs/cluster.md)
#                                   (default PREFIX/lib/systemd/system for /usr and /usr/local,
#                                   which systemd searches; /etc/systemd/system for any other PREFIX)
#   /etc/bootlet/containerd.toml    only when missing
#   /etc/bootlet/config.yaml        only when missing (bootlet.service's BootletConfiguration)
#   /etc/bootlet/worker.yaml        only when missing (bootlet-worker.service's)
#   /etc/default/bootlet            only when missing
# The files in dist/systemd name /usr/local; another PREFIX is written into
# them as they are installed. Then, only when DESTDIR is empty and systemd
# is PID 1 (/run/systemd/system exists), `systemctl daemon-reload`.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
DIST="${REPO_ROOT}/dist/systemd"

FROM="" DESTDIR="" PREFIX=/usr/local UNITDIR="" IMAGES=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) FROM="$2"; shift ;;
    --destdir) DESTDIR="$2"; shift ;;
    --prefix) PREFIX="$2"; shift ;;
    --unitdir) UNITDIR="$2"; shift ;;
    --images) IMAGES=1 ;;
    *) die "unknown argument: $1 (see the head of $0)" ;;
  esac
  shift
done
[[ -n "${FROM}" ]] || die "--out is required (the Makefile's _output)"
[[ "${PREFIX}" == /* ]] || die "PREFIX must be absolute, not '${PREFIX}'"
PREFIX="${PREFIX%/}"
[[ -z "${DESTDIR}" || "${DESTDIR}" == /* ]] || die "DESTDIR must be absolute, not '${DESTDIR}'"
DESTDIR="${DESTDIR%/}"
if [[ -z "${UNITDIR}" ]]; then
  case "${PREFIX}" in
    /usr|/usr/local) UNITDIR="${PREFIX}/lib/systemd/system" ;;
    *) UNITDIR=/etc/systemd/system ;;
  esac
fi

BINS=(bootlet bootlet-tools)
PRIVATE=(containerd containerd-shim-runc-v2 runc ctr kubelet)
CNI=(bridge host-local loopback portmap)
missing=()
for b in "${BINS[@]}" "${PRIVATE[@]}"; do [[ -x "${FROM}/bin/${b}" ]] || missing+=("${FROM}/bin/${b}"); done
for b in "${CNI[@]}"; do [[ -x "${FROM}/cni/bin/${b}" ]] || missing+=("${FROM}/cni/bin/${b}"); done
[[ ${#missing[@]} -eq 0 ]] || die "missing, run make toolchain build first: ${missing[*]}"

# prefixed FILE: FILE with /usr/local's paths moved to PREFIX.
prefixed() {
  sed -e "s|/usr/local/bin/|${PREFIX}/bin/|g" \
    -e "s|/usr/local/libexec/bootlet|${PREFIX}/libexec/bootlet|g" \
    -e "s|/usr/local/share/bootlet|${PREFIX}/share/bootlet|g" "$1"
}

# config SRC DEST: installs an edited copy of SRC unless DEST exists (an
# administrator's file is never overwritten).
config() {
  local dest="${DESTDIR}$2"
  if [[ -e "${dest}" ]]; then
    echo "kept ${dest} (exists; the default is ${DIST}/$(basename "$1"))"
    return 0
  fi
  install -d -m 0755 "$(dirname "${dest}")"
  prefixed "$1" > "${dest}.tmp"
  chmod 0644 "${dest}.tmp"
  mv "${dest}.tmp" "${dest}"
  echo "installed ${dest}"
}

bindir="${DESTDIR}${PREFIX}/bin"
libexec="${DESTDIR}${PREFIX}/libexec/bootlet"
images="${DESTDIR}${PREFIX}/share/bootlet/images"
units="${DESTDIR}${UNITDIR}"
install -d -m 0755 "${bindir}" "${libexec}/cni" "${images}" "${units}"
for b in "${BINS[@]}"; do install -m 0755 "${FROM}/bin/${b}" "${bindir}/${b}"; done
for b in "${PRIVATE[@]}"; do install -m 0755 "${FROM}/bin/${b}" "${libexec}/${b}"; done
for b in "${CNI[@]}"; do install -m 0755 "${FROM}/cni/bin/${b}" "${libexec}/cni/${b}"; done
echo "installed ${BINS[*]} in ${bindir}; ${PRIVATE[*]} in ${libexec}; CNI ${CNI[*]} in ${libexec}/cni"
for u in bootlet-containerd.service bootlet.service bootlet-kubelet.service bootlet-kubelet-worker.service bootlet-upgrade-agent.service bootlet-worker.service; do
  prefixed "${DIST}/${u}" > "${units}/${u}.tmp"
  chmod 0644 "${units}/${u}.tmp"
  mv "${units}/${u}.tmp" "${units}/${u}"
done
echo "installed the units in ${units}"
config "${DIST}/containerd.toml" /etc/bootlet/containerd.toml
config "${DIST}/bootlet-config.yaml" /etc/bootlet/config.yaml
config "${DIST}/bootlet-worker.yaml" /etc/bootlet/worker.yaml
config "${DIST}/bootlet.default" /etc/default/bootlet

if [[ ${IMAGES} -eq 1 ]]; then
  archives=("${FROM}/images/pause.tar" "${FROM}/images/control-plane/"*.tar "${FROM}/images/addons/"*.tar)
  for a in "${archives[@]}"; do [[ -f "${a}" ]] || die "missing ${a}: run make images first"; done
  # Flat: --preload-images reads one directory. The control-plane and add-on
  # archives have distinct names (etcd.tar, kube-apiserver.tar, flannel.tar, ...).
  for a in "${archives[@]}"; do install -m 0644 "${a}" "${images}/$(basename "${a}")"; done
  echo "installed ${#archives[@]} image archives in ${images}"
fi

if [[ -n "${DESTDIR}" ]]; then
  echo "not reloading systemd: DESTDIR is set"
elif [[ ! -d /run/systemd/system ]]; then
  echo "not reloading systemd: it is not PID 1 here (no /run/systemd/system)"
else
  systemctl daemon-reload
  echo "systemctl daemon-reload done; nothing was enabled or started"
fi
if [[ -z "${DESTDIR}" ]]; then
  echo "start a master with: systemctl enable --now bootlet-containerd.service bootlet.service bootlet-kubelet.service"
  echo "or a worker (docs/cluster.md): systemctl enable bootlet-containerd.service bootlet-kubelet-worker.service bootlet-upgrade-agent.service bootlet-worker.service"
fi
