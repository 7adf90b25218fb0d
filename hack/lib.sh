# shellcheck shell=bash
# hack/lib.sh: the preamble every hack/ script sources (never run it):
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# It sets strict mode, the repository paths, logging helpers, the Go
# environment for reproducible builds, and the one ensure_apt. It defines
# variables and functions only; sourcing it has no side effects.

set -euo pipefail

# Paths: everything built goes to _output/ (git-ignored).
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HACK="${REPO_ROOT}/hack"
OUT="${REPO_ROOT}/_output"
BIN="${OUT}/bin"
CNI_BIN="${OUT}/cni/bin"
export REPO_ROOT HACK OUT BIN CNI_BIN

# Logging: every line to stderr, prefixed with the script's name, so the
# output of `make` says which script spoke.
log() { echo "$(basename "$0"): $*" >&2; }
warn() { log "warning: $*"; }
die() { log "$*"; exit 1; }

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# go_reproducible: non-mutating module mode (go.sum is committed, never
# rewritten), no workspace, the local Go toolchain.
go_reproducible() {
  export GOFLAGS="-mod=readonly -buildvcs=false"
  export GOWORK=off
  export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
}

# ensure_apt PACKAGE...: installs the Debian packages that are missing with
# apt-get (one `apt-get update` per process). dpkg's lock is waited for, not
# failed on, so two scripts installing at once both succeed; `make deps`
# installs everything up front anyway.
_APT_UPDATED=0
ensure_apt() {
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "${p}" 2>/dev/null | grep -q "install ok installed" || missing+=("${p}")
  done
  [[ ${#missing[@]} -gt 0 ]] || return 0
  log "installing ${missing[*]} via apt-get"
  local lock=(-o DPkg::Lock::Timeout=300)
  if [[ ${_APT_UPDATED} -eq 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get "${lock[@]}" update -qq
    _APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get "${lock[@]}" install -y -qq "${missing[@]}" >/dev/null
}

# alive PID: the process exists and is not a zombie (a killed daemon whose
# parent has not reaped it yet is gone for every purpose here).
alive() {
  local s
  s="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  s="${s##*) }"
  [[ -n "${s}" && "${s:0:1}" != Z && "${s:0:1}" != X ]]
}

# pidfile_pid PIDFILE MARK: prints the pid in PIDFILE when that process is
# alive and its command line contains MARK, i.e. it is still our daemon and
# not a recycled pid; fails otherwise.
pidfile_pid() {
  local pid
  [[ -f "$1" ]] || return 1
  pid="$(cat "$1")"
  [[ -n "${pid}" ]] && alive "${pid}" || return 1
  tr '\0' ' ' < "/proc/${pid}/cmdline" 2>/dev/null | grep -qF -- "$2" || return 1
  echo "${pid}"
}

# wait_gone PID TENTHS: waits up to TENTHS tenths of a second for PID to end.
wait_gone() {
  local _
  for _ in $(seq 1 "$2"); do
    alive "$1" || return 0
    sleep 0.1
  done
  ! alive "$1"
}

# up_node_name: the node name of `make up` (bootlet's --node-name, the
# kubelet's --hostname-override, render's --node-name): the host name,
# lower-cased, as bootlet's default.
up_node_name() { hostname | tr '[:upper:]' '[:lower:]'; }
