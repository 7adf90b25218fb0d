#!/usr/bin/env bash
# The Debian 12 root file system TestSystemdBoot (e2e/systemd_test.go) boots
# with systemd-nspawn: what an OS image of a node holds before `make install`
# (systemd as init, iproute2, iptables, mount, kmod). Built once with
# debootstrap from Debian's mirror into OUT/build/node-rootfs/rootfs, with
# this script's checksum beside it (OUT/build/node-rootfs/recipe): a changed
# recipe (this file) rebuilds it, an unchanged one is a no-op. The test copies
# it before it installs anything: the cached tree is never booted.
#
#   hack/node-rootfs.sh [--out DIR]     prints the rootfs's path
#
# Needs root (debootstrap) and the network to the Debian mirror, once
# (DEBIAN_MIRROR, default http://deb.debian.org/debian); about 2.5 min and
# 280 MB.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT="$2"; shift ;;
    *) die "unknown argument: $1 (see the head of $0)" ;;
  esac
  shift
done

SUITE=bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# systemd-sysv: /sbin/init is systemd; iproute2, iptables, kmod: the CNI
# plugins (bridge, portmap) and the kubelet call them; procps: debugging;
# keepalived, curl: a master of `make cluster` holds the API address (a VRRP
# VIP) while its apiserver answers /readyz (docs/cluster.md, "The API
# address"). keepalived.service starts only where
# /etc/keepalived/keepalived.conf exists (its ConditionFileNotEmpty): on a
# cluster's masters, not on workers or TestSystemdBoot's node.
PACKAGES=systemd,systemd-sysv,iproute2,iptables,kmod,procps,keepalived,curl

DIR="${OUT}/build/node-rootfs"
ROOTFS="${DIR}/rootfs"
recipe="$(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1)"
if [[ -f "${DIR}/recipe" && "$(cat "${DIR}/recipe")" == "${recipe}" && -x "${ROOTFS}/lib/systemd/systemd" ]]; then
  echo "${ROOTFS}"
  exit 0
fi
[[ "$(id -u)" -eq 0 ]] || die "debootstrap needs root"
command -v debootstrap >/dev/null || ensure_apt debootstrap
mkdir -p "${DIR}"
rm -rf "${DIR}/rootfs.tmp" "${DIR}/recipe"
start="$(now)"
debootstrap --variant=minbase --include="${PACKAGES}" "${SUITE}" "${DIR}/rootfs.tmp" "${MIRROR}" > "${DIR}/debootstrap.log" 2>&1 \
  || die "debootstrap failed (log: ${DIR}/debootstrap.log): $(tail -5 "${DIR}/debootstrap.log")"
# No downloaded packages or lists in the cache; a machine ID is made at the
# first boot of each copy (an empty /etc/machine-id: systemd's "first boot").
rm -rf "${DIR}/rootfs.tmp/var/cache/apt/archives/"*.deb "${DIR}/rootfs.tmp/var/lib/apt/lists/"*
: > "${DIR}/rootfs.tmp/etc/machine-id"
rm -rf "${ROOTFS}"
mv "${DIR}/rootfs.tmp" "${ROOTFS}"
echo "${recipe}" > "${DIR}/recipe"
log "built ${ROOTFS} (${SUITE}, ${PACKAGES}) in $(elapsed "${start}" "$(now)") s"
echo "${ROOTFS}"
