#!/usr/bin/env bash
# Installs Debian packages with apt-get if they are missing: the given ones,
# or (no arguments) everything bootlet's build, lint and tests need, which
# `make deps` does once up front so parallel e2e tests never race on dpkg's
# lock.
#
#   hack/deps.sh [PACKAGE...]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pkgs=("$@")
[[ ${#pkgs[@]} -gt 0 ]] || pkgs=(gcc libc6-dev libseccomp-dev pkg-config busybox-static iptables nftables conntrack libcap2-bin curl shellcheck systemd systemd-container debootstrap)
ensure_apt "${pkgs[@]}"
