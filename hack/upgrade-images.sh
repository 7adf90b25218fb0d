#!/usr/bin/env bash
# Builds the image archives of an upgrade's target version beside the
# current version's (`make upgrade-images TO=VERSION`): the Kubernetes
# binaries, etcd and CoreDNS of VERSION from their pinned modules
# (`hack/toolchain.sh --target VERSION` into _output/versions/VERSION/bin),
# then their OCI archives (`hack/images.sh --target VERSION` into
# _output/images/VERSION/), and lists the archives with their sizes and the
# image names their OCI index carries. Imports nothing: a node receives the
# version with `bootlet images import _output/images/VERSION`.
#
# Usage: hack/upgrade-images.sh VERSION [--force]
#
# VERSION is a row of hack/versions.sh (v1.37.2); others are refused. Cached
# like toolchain.sh and images.sh: a second run rebuilds nothing.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "${HACK}/versions.sh"

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }

TO=""
FORCE=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --force) FORCE=(--force) ;;
    -h|--help) usage; exit 0 ;;
    -*) log "unknown flag: $1"; usage >&2; exit 2 ;;
    *) [[ -z "${TO}" ]] || { log "one VERSION only"; exit 2; }; TO="$1" ;;
  esac
  shift
done
[[ -n "${TO}" ]] || die "which version? make upgrade-images TO=VERSION, one of: $(target_versions | paste -sd' ')"
target_version "${TO}"

START=$(now)
"${HACK}/toolchain.sh" --target "${TO}" "${FORCE[@]}"
"${HACK}/images.sh" --target "${TO}" "${FORCE[@]}"

# The archives, their sizes and the names in their index.json (what
# `bootlet images import` and `ctr images import` name the images).
printf '%-52s %6s  %s\n' archive size images
for f in "${TARGET_IMAGES}"/*.tar; do
  names="$(tar -xOf "${f}" index.json \
    | jq -r '[.manifests[].annotations["io.containerd.image.name"] // empty] | join(" ")')"
  printf '%-52s %6s  %s\n' "${f#"${REPO_ROOT}"/}" "$(du -h "${f}" | cut -f1)" "${names}"
done
printf '%-52s total %6ss\n' "upgrade-images ${TO}" "$(elapsed "${START}" "$(now)")"
