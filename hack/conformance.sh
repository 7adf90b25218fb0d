#!/usr/bin/env bash
# Runs the upstream Kubernetes conformance suite (the [Conformance] specs of
# e2e.test v1.36.3) against the cluster of `make up`, offline: builds e2e.test,
# ginkgo and the test images (toolchain.sh --conformance, images.sh
# conformance), imports into make up's containerd the images it lacks, then
# runs the specs in parallel with ginkgo.
#
# Usage: hack/conformance.sh [--count] [--no-build] [--no-import] [--target VERSION]
#   --count     print how many specs the focus and skip select (a Ginkgo dry
#               run of e2e.test; needs no cluster) and exit
#   --no-build  use e2e.test, ginkgo and the archives already in _output
#   --no-import import nothing: the caller put the archives into every node's
#               containerd (a cluster of several nodes, each its own)
#   --target VERSION  the suite of VERSION (a row of hack/versions.sh:
#               v1.37.2) instead, for the cluster upgraded to it (make
#               upgrade TO=VERSION): its e2e.test and ginkgo
#               (toolchain.sh --conformance --target VERSION, in
#               _output/versions/VERSION/bin), its test images (images.sh
#               --target VERSION conformance, in
#               _output/images/VERSION/conformance), its etcd archive
#               (_output/images/VERSION/etcd.tar, make upgrade-images) and
#               its kubectl for the kubectl specs; results in
#               _output/conformance/VERSION. v1.36.3's files are not touched.
#
# Environment (defaults in brackets):
#   CONFORMANCE_VERSION  as --target VERSION [empty: v1.36.3]
#   CONFORMANCE_FOCUS    ginkgo focus ['\[Conformance\]']
#   CONFORMANCE_SKIP     ginkgo skip ['\[Serial\]|\[Disruptive\]|should have at
#                        least two untainted nodes']
#   CONFORMANCE_PROCS    parallel ginkgo processes [4]
#   CONFORMANCE_TIMEOUT  whole-suite timeout [4h]
#   CONFORMANCE_KUBECONFIG  [/var/lib/bootlet-up/admin.kubeconfig]
#   CONFORMANCE_CONTAINERD  containerd socket to import into
#                        [/run/bootlet-up/containerd.sock]
#   CONFORMANCE_RESULTS  where the results go [_output/conformance, with
#                        --target _output/conformance/VERSION]
#
# Writes into CONFORMANCE_RESULTS:
# junit_01.xml (the e2e framework's report), e2e.log (ginkgo's output),
# summary.json {passed, failed, skipped, not_selected, failures} from the
# JUnit; prints the failed specs. Exits 1 when a spec failed or ginkgo did.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "${HACK}/versions.sh"
go_reproducible

FOCUS="${CONFORMANCE_FOCUS:-\[Conformance\]}"
# The one selected spec that needs two nodes ([sig-architecture] Conformance
# Tests should have at least two untainted nodes) fails by design on make up's
# single node.
SKIP="${CONFORMANCE_SKIP:-\[Serial\]|\[Disruptive\]|should have at least two untainted nodes}"
PROCS="${CONFORMANCE_PROCS:-4}"
TIMEOUT="${CONFORMANCE_TIMEOUT:-4h}"
KUBECONFIG_FILE="${CONFORMANCE_KUBECONFIG:-/var/lib/bootlet-up/admin.kubeconfig}"
CTRD_SOCK="${CONFORMANCE_CONTAINERD:-/run/bootlet-up/containerd.sock}"
RESULTS="${OUT}/conformance"
E2E="${BIN}/e2e.test"
GINKGO="${BIN}/ginkgo"
CONF_IMAGES="${OUT}/images/conformance"
ETCD_ARCHIVE="${OUT}/images/control-plane/etcd.tar"
VERSION="${CONFORMANCE_VERSION:-}"

COUNT=0
BUILD=1
IMPORT=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --count) COUNT=1 ;;
    --no-build) BUILD=0 ;;
    --no-import) IMPORT=0 ;;
    --target) [[ $# -ge 2 ]] || die "--target needs a VERSION"; VERSION="$2"; shift ;;
    --target=*) VERSION="${1#--target=}" ;;
    -h|--help) sed -n '2,41p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) log "unknown flag: $1"; exit 2 ;;
  esac
  shift
done

# Another version's suite: its binaries, archives and results, beside
# v1.36.3's (the default, also when named).
TARGET_ARGS=()
# The kubectl specs exec --kubectl-path, by default the first kubectl in
# PATH, which on a machine with another one installed (gcloud's, say) is not
# the cluster's: the one make up built, or the version's own below.
E2E_ARGS=(--kubectl-path="${BIN}/kubectl")
[[ "${VERSION}" != v1.36.3 ]] || VERSION=""
if [[ -n "${VERSION}" ]]; then
  target_version "${VERSION}"
  [[ -f "${TARGET_TOOLS}/conformance/go.mod" ]] \
    || die "${TARGET_TOOLS#"${REPO_ROOT}"/}/conformance/go.mod is missing: ${VERSION} has no conformance module"
  TARGET_ARGS=(--target "${VERSION}")
  E2E="${TARGET_OUT}/bin/e2e.test"
  GINKGO="${TARGET_OUT}/bin/ginkgo"
  RESULTS="${OUT}/conformance/${VERSION}"
  CONF_IMAGES="${TARGET_IMAGES}/conformance"
  ETCD_ARCHIVE="${TARGET_IMAGES}/etcd.tar"
  E2E_ARGS=(--kubectl-path="${TARGET_OUT}/bin/kubectl")
fi
RESULTS="${CONFORMANCE_RESULTS:-${RESULTS}}"

# count_specs: the number of specs FOCUS and SKIP select, from a Ginkgo dry
# run ("Ran N of M Specs"): no BeforeSuite runs, so no cluster is contacted.
count_specs() {
  local out
  out="$("${E2E}" --ginkgo.dry-run --ginkgo.no-color --ginkgo.focus="${FOCUS}" --ginkgo.skip="${SKIP}" \
    --provider=skeleton --kubeconfig=/dev/null 2>&1)" || true
  grep -oE 'Ran [0-9]+ of [0-9]+ Specs' <<< "${out}" | tail -n 1 | grep . \
    || { echo "${out}" | tail -n 20 >&2; die "dry run printed no 'Ran N of M Specs'"; }
}

# archive_ref FILE: "NAME DIGEST" of an ocibuild archive, from its index.json
# (io.containerd.image.name and the manifest's digest), to compare with what
# containerd holds.
archive_ref() {
  local index name digest
  index="$(tar -xOf "$1" index.json)" || die "$1: no index.json"
  name="$(grep -oE '"io\.containerd\.image\.name": *"[^"]+"' <<< "${index}" | sed -E 's/.*: *"([^"]+)"/\1/')"
  digest="$(grep -oE '"digest": *"sha256:[0-9a-f]+"' <<< "${index}" | head -n 1 | sed -E 's/.*"(sha256:[0-9a-f]+)"/\1/')"
  [[ -n "${name}" && -n "${digest}" ]] || die "$1: no image name or digest in index.json"
  echo "${name} ${digest}"
}

# import_images FILE...: imports each archive whose image containerd does not
# have under that name and manifest digest (missing, or an older build), into
# the k8s.io namespace the CRI uses. With the images present and tagged (not
# :latest), every Conformance pod's default pull policy IfNotPresent pulls
# nothing.
import_images() {
  local have f ref name digest imported=0
  have="$("${BIN}/ctr" -n k8s.io --address "${CTRD_SOCK}" images ls 2>/dev/null | awk 'NR > 1 {print $1 " " $3}')" \
    || die "cannot list the images of ${CTRD_SOCK}"
  for f in "$@"; do
    ref="$(archive_ref "${f}")"
    name="${ref% *}"; digest="${ref#* }"
    if grep -qxF "${name} ${digest}" <<< "${have}"; then
      continue
    fi
    log "importing ${name} (${f#"${REPO_ROOT}"/})"
    "${BIN}/ctr" -n k8s.io --address "${CTRD_SOCK}" images import "${f}" >/dev/null 2>&1 \
      || die "importing ${f} failed"
    imported=$((imported + 1))
  done
  log "images: ${imported} imported, $(( $# - imported )) already present"
}

if [[ ${BUILD} -eq 1 ]]; then
  "${HACK}/toolchain.sh" --conformance "${TARGET_ARGS[@]}"
  if [[ ${COUNT} -eq 0 ]]; then
    # ctr and kubectl as make up builds them: a no-op after make up.
    "${HACK}/toolchain.sh" --only ctr,kubectl
    # The version's kubectl (E2E_ARGS): a no-op after make upgrade-images.
    [[ -z "${VERSION}" ]] || "${HACK}/toolchain.sh" --target "${VERSION}" --only kubectl
    "${HACK}/images.sh" "${TARGET_ARGS[@]}" conformance
  fi
fi
[[ -x "${E2E}" && -x "${GINKGO}" ]] || die "e2e.test or ginkgo missing: run hack/toolchain.sh --conformance${VERSION:+ --target ${VERSION}}"

if [[ ${COUNT} -eq 1 ]]; then
  count_specs
  exit 0
fi

# The cluster of make up must be there; this script starts nothing.
[[ -r "${KUBECONFIG_FILE}" ]] || die "${KUBECONFIG_FILE} is missing: is the cluster of 'make up' running?"
[[ ${IMPORT} -eq 0 || ( -S "${CTRD_SOCK}" && -x "${BIN}/ctr" ) ]] || die "${CTRD_SOCK} or ${BIN}/ctr is missing: is the cluster of 'make up' running?"
"${BIN}/kubectl" --kubeconfig "${KUBECONFIG_FILE}" get nodes -o wide >&2 || die "the apiserver of ${KUBECONFIG_FILE} does not answer"
if [[ -n "${VERSION}" ]]; then
  # Another version's suite is for a cluster of that version; a warning, not
  # a refusal, so that a skew can be run on purpose.
  server="$("${BIN}/kubectl" --kubeconfig "${KUBECONFIG_FILE}" get --raw /version 2>/dev/null \
    | grep -oE '"gitVersion": *"[^"]+"' | sed -E 's/.*"([^"]+)"$/\1/')" || true
  [[ "${server}" == "${VERSION}" ]] \
    || warn "the apiserver is ${server:-of an unknown version}, not ${VERSION}: upgrade it first (make upgrade TO=${VERSION})"
  [[ -x "${TARGET_OUT}/bin/kubectl" ]] \
    || die "${TARGET_OUT#"${REPO_ROOT}"/}/bin/kubectl is missing: run hack/toolchain.sh --target ${VERSION} --only kubectl"
fi

archives=("${CONF_IMAGES}"/*.tar)
[[ -e "${archives[0]}" ]] || die "no archives in ${CONF_IMAGES#"${REPO_ROOT}"/}: run hack/images.sh ${TARGET_ARGS[*]:+${TARGET_ARGS[*]} }conformance"
# The aggregator test runs etcd beside sample-apiserver: the control-plane
# image, which make up imports already (with --target, the version's, which
# make upgrade imports).
[[ -f "${ETCD_ARCHIVE}" ]] && archives+=("${ETCD_ARCHIVE}")
[[ -z "${VERSION}" || -f "${ETCD_ARCHIVE}" ]] \
  || warn "${ETCD_ARCHIVE#"${REPO_ROOT}"/} is missing (make upgrade-images TO=${VERSION}): the aggregator spec's etcd:${TARGET_ETCD_TAG} is not imported"
if [[ ${IMPORT} -eq 1 ]]; then
  import_images "${archives[@]}"
else
  log "images: not imported (--no-import): ${#archives[@]} archives expected on every node"
fi

mkdir -p "${RESULTS}"
rm -f "${RESULTS}"/junit*.xml "${RESULTS}/summary.json" "${RESULTS}/e2e.log"
log "selected: $(count_specs); ${PROCS} ginkgo processes ${PROCS} (focus '${FOCUS}', skip '${SKIP}'); log in ${RESULTS#"${REPO_ROOT}"/}/e2e.log"

# --provider=skeleton: no cloud; --disable-log-dump: no ssh to nodes for logs;
# --report-dir: junit_01.xml. Ginkgo's own --timeout defaults to 1h, too short
# for the suite on 2 cores.
start=$(now)
rc=0
"${GINKGO}" --procs="${PROCS}" --timeout="${TIMEOUT}" --no-color \
  --focus="${FOCUS}" --skip="${SKIP}" \
  "${E2E}" -- \
  --kubeconfig="${KUBECONFIG_FILE}" --provider=skeleton --disable-log-dump \
  --report-dir="${RESULTS}" "${E2E_ARGS[@]}" 2>&1 | tee "${RESULTS}/e2e.log" || rc=$?
log "ginkgo exited ${rc} after $(elapsed "${start}" "$(now)")s"

junits=("${RESULTS}"/junit*.xml)
[[ -e "${junits[0]}" ]] || die "no JUnit report in ${RESULTS#"${REPO_ROOT}"/} (see e2e.log)"
(cd "${HACK}/junitsum" && go run . -focus "${FOCUS}" -skip "${SKIP}" -o "${RESULTS}/summary.json" "${junits[@]}") \
  || die "summarizing the JUnit failed"
log "summary: ${RESULTS#"${REPO_ROOT}"/}/summary.json"
failed="$(grep -oE '"failed": *[0-9]+' "${RESULTS}/summary.json" | grep -oE '[0-9]+$')"
[[ ${rc} -eq 0 && ${failed} -eq 0 ]] || exit 1
