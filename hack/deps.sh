#!/usr/bin/env bash
# Installs Debian packages with apt-get if they are missing: the given ones,
# or (no arguments) everything bootlet's build and tests need, which
# `make deps` does once up front so parallel e2e tests never race on dpkg's
# lock.
#
#   hack/deps.sh [PACKAGE...]
set -euo pipefail
pkgs=("$@")
[[ ${#pkgs[@]} -gt 0 ]] || pkgs=(gcc libc6-dev libseccomp-dev pkg-config busybox-static iptables curl)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "deps: installing ${missing[*]} via apt-get" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
