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

# dedicated_dir PATH: prints PATH made absolute and canonical (realpath -m:
# symlinks resolved, nothing needs to exist) if it is fit to be a directory
# a script owns and later removes with rm -rf; otherwise dies. Fit means: an
# absolute path with no '..' element, at least two levels deep, and named
# for bootlet (its last element starts with "bootlet"), so a typo or a
# hostile argument (/, /var/lib/.., /home) never reaches rm -rf.
dedicated_dir() {
  local p="$1" c
  [[ "${p}" == /* ]] || die "${p}: must be an absolute path"
  [[ "/${p}/" != */../* ]] || die "${p}: must not contain '..'"
  c="$(realpath -m -- "${p}")" || die "${p}: cannot canonicalise"
  [[ "${c}" =~ ^/[^/]+/[^/]+ ]] || die "${p} (${c}): must be at least two levels below /"
  [[ "$(basename -- "${c}")" == bootlet* ]] || die "${p} (${c}): must be a dedicated directory named bootlet* (e.g. /var/lib/bootlet-up)"
  printf '%s\n' "${c}"
}

# split_iptables_rule LINE: splits one iptables-save line into the array
# RULE, as iptables-save quotes it (double quotes, \" and \\ inside), never
# through eval: a rule is data a pod with NET_ADMIN can write.
split_iptables_rule() {
  local line="$1" word="" inword=0 quoted=0 i ch
  RULE=()
  for ((i = 0; i < ${#line}; i++)); do
    ch="${line:i:1}"
    if ((quoted)); then
      if [[ "${ch}" == "\\" && $((i + 1)) -lt ${#line} ]]; then
        i=$((i + 1)); word+="${line:i:1}"
      elif [[ "${ch}" == '"' ]]; then
        quoted=0
      else
        word+="${ch}"
      fi
    elif [[ "${ch}" == '"' ]]; then
      quoted=1; inword=1
    elif [[ "${ch}" == ' ' || "${ch}" == $'\t' ]]; then
      if ((inword)); then RULE+=("${word}"); word=""; inword=0; fi
    else
      word+="${ch}"; inword=1
    fi
  done
  ((quoted == 0)) || return 1
  if ((inword)); then RULE+=("${word}"); fi
  return 0
}

# cni_rule_of NET LINE: sets RULE to the argv that deletes the iptables-save
# rule LINE (-A CHAIN ... as arguments after -D) when it is a CNI rule of
# network NET: appended to a CNI-* chain or to a built-in chain CNI hooks
# into, carrying the CNI comment naming NET, and holding no other iptables
# command or table option. Returns 1 for anything else.
cni_rule_of() {
  local net="$1" line="$2" i tok named=0
  split_iptables_rule "${line}" || return 1
  ((${#RULE[@]} >= 2)) && [[ "${RULE[0]}" == -A ]] || return 1
  [[ "${RULE[1]}" =~ ^(CNI-[A-Za-z0-9_-]+|POSTROUTING|PREROUTING|OUTPUT|FORWARD|INPUT)$ ]] || return 1
  for ((i = 2; i < ${#RULE[@]}; i++)); do
    tok="${RULE[i]}"
    case "${tok}" in
      -A|-C|-D|-I|-R|-S|-F|-Z|-N|-X|-P|-E|-L|-t|--append|--check|--delete|--insert|--replace|--list|--list-rules|--flush|--zero|--new-chain|--delete-chain|--policy|--rename-chain|--table|--modprobe|-M) return 1 ;;
    esac
    if [[ "${RULE[i - 1]}" == --comment && "${tok}" == *"name: \"${net}\""* ]]; then named=1; fi
  done
  ((named)) || return 1
  RULE=("${RULE[@]:1}")
}

# cleanup_iptables NETNAME: deletes leftover CNI rules/chains (ipMasq, portmap)
# of pods of a containerd.sh instance that were killed without a CNI DEL.
cleanup_iptables() {
  local net="$1" table line chain c
  command -v iptables-save >/dev/null || return 0
  for table in nat filter; do
    local chains=()
    while IFS= read -r line; do
      [[ "${line}" == -A* && "${line}" == *"\\\"${net}\\\""* ]] || continue
      # Parsed into argv and checked (cni_rule_of), never eval'd: a pod with
      # NET_ADMIN can write rules that look like ours.
      cni_rule_of "${net}" "${line}" || { warn "not deleting an iptables rule that is not a CNI rule of ${net}: ${line}"; continue; }
      chain="${RULE[0]}"
      iptables -w -t "${table}" -D "${RULE[@]}" 2>/dev/null || true
      if [[ "${chain}" == CNI-* && "${chain}" != CNI-HOSTPORT-* && "${chain}" != CNI-FORWARD ]]; then
        chains+=("${chain}")
      fi
    done < <(iptables-save -t "${table}" 2>/dev/null)
    for c in $(printf '%s\n' "${chains[@]}" | sort -u); do
      iptables -w -t "${table}" -F "${c}" 2>/dev/null || true
      iptables -w -t "${table}" -X "${c}" 2>/dev/null || true
    done
  done
}

# addon_hook_of LINE: sets RULE to the argv that deletes the iptables-save
# rule LINE (as arguments after -D) when it is a hook of kube-proxy or
# flannel: appended to a built-in chain, jumping to a KUBE-* or FLANNEL-*
# chain, holding no other iptables command or table option. Returns 1 for
# anything else.
addon_hook_of() {
  local line="$1" i tok jumps=0
  split_iptables_rule "${line}" || return 1
  ((${#RULE[@]} >= 4)) && [[ "${RULE[0]}" == -A ]] || return 1
  [[ "${RULE[1]}" =~ ^(POSTROUTING|PREROUTING|OUTPUT|FORWARD|INPUT)$ ]] || return 1
  for ((i = 2; i < ${#RULE[@]}; i++)); do
    tok="${RULE[i]}"
    case "${tok}" in
      -A|-C|-D|-I|-R|-S|-F|-Z|-N|-X|-P|-E|-L|-t|--append|--check|--delete|--insert|--replace|--list|--list-rules|--flush|--zero|--new-chain|--delete-chain|--policy|--rename-chain|--table|--modprobe|-M) return 1 ;;
    esac
    if [[ "${RULE[i - 1]}" == -j && "${tok}" =~ ^(KUBE|FLANNEL)-[A-Za-z0-9_-]+$ ]]; then jumps=1; fi
  done
  ((jumps)) || return 1
  RULE=("${RULE[@]:1}")
}

# cleanup_addon_iptables: removes what kube-proxy and flannel left in
# iptables and ip6tables (their hooks in the built-in chains, then their
# KUBE-* and FLANNEL-* chains), as a power-off does. Only `make down`,
# `make reboot` and the e2e tests that ran the add-ons call it; a host
# that runs another kube-proxy must not.
cleanup_addon_iptables() {
  local cmd table line c
  for cmd in iptables ip6tables; do
    command -v "${cmd}-save" >/dev/null || continue
    for table in nat filter mangle; do
      local chains=()
      while IFS= read -r line; do
        if [[ "${line}" =~ ^:((KUBE|FLANNEL)-[A-Za-z0-9_-]+)\  ]]; then
          chains+=("${BASH_REMATCH[1]}")
          continue
        fi
        [[ "${line}" == -A* ]] || continue
        addon_hook_of "${line}" || continue
        "${cmd}" -w -t "${table}" -D "${RULE[@]}" 2>/dev/null || true
      done < <("${cmd}-save" -t "${table}" 2>/dev/null)
      for c in "${chains[@]}"; do "${cmd}" -w -t "${table}" -F "${c}" 2>/dev/null || true; done
      for c in "${chains[@]}"; do "${cmd}" -w -t "${table}" -X "${c}" 2>/dev/null || true; done
    done
  done
}

# cni_network_power_off: what a power-off takes from the host's network
# when the pod network is flannel's: its bridge and vxlan device, and the
# iptables rules of kube-proxy and flannel (cleanup_addon_iptables).
cni_network_power_off() {
  ip link delete cni0 2>/dev/null || true
  ip link delete flannel.1 2>/dev/null || true
  cleanup_addon_iptables
}

# EGRESS_GUARD_CHAIN holds the egress guard's rules (egress_guard).
EGRESS_GUARD_CHAIN=BOOTLET-EGRESS-GUARD

# external_ifaces: the interfaces of the host's IPv4 default routes, the
# ones that lead off this machine.
external_ifaces() {
  ip -4 route show default 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p' | sort -u
}

# host_nameservers: the IPv4 resolvers of /etc/resolv.conf that are not on
# loopback (the ones a pod with dnsPolicy Default, CoreDNS, forwards to).
host_nameservers() {
  awk '$1 == "nameserver" && $2 ~ /^[0-9.]+$/ && $2 !~ /^127\./ { print $2 }' /etc/resolv.conf 2>/dev/null | sort -u
}

# egress_guard add|del -s|-d CIDR: pod and test traffic never leaves this
# machine. With -s, packets forwarded from CIDR (a pod network) out of an
# external interface are rejected, except DNS to the host's own resolvers
# (CoreDNS forwards there, as kubeadm's does). With -d, packets to CIDR (the
# service network: without kube-proxy's DNAT they would follow the default
# route) are rejected on the way out, forwarded or local. The rules live in
# one chain, hooked first into FORWARD and OUTPUT; del removes exactly the
# rules add made, and the chain with its hooks once it is empty. Calls are
# serialised by a lock file: parallel e2e tests add and remove their own.
egress_guard() {
  mkdir -p /run/lock
  (
    flock -w 120 9 || die "egress_guard: /run/lock/bootlet-egress-guard.lock is held"
    _egress_guard "$@"
  ) 9>>/run/lock/bootlet-egress-guard.lock
}

_egress_guard() {
  local op="$1" dir="$2" cidr="$3" ext ns proto rules=()
  if [[ "${op}" != add && "${op}" != del ]] || [[ "${dir}" != -s && "${dir}" != -d ]] || [[ -z "${cidr}" ]]; then
    die "egress_guard add|del -s|-d CIDR"
  fi
  command -v iptables >/dev/null || ensure_apt iptables
  for ext in $(external_ifaces); do
    if [[ "${dir}" == -s ]]; then
      for ns in $(host_nameservers); do
        for proto in udp tcp; do
          rules+=("-s ${cidr} -o ${ext} -d ${ns}/32 -p ${proto} --dport 53 -j RETURN")
        done
      done
    fi
    rules+=("${dir} ${cidr} -o ${ext} -j REJECT --reject-with icmp-admin-prohibited")
  done
  local r hook
  if [[ "${op}" == add ]]; then
    iptables -w -N "${EGRESS_GUARD_CHAIN}" 2>/dev/null || true
    for hook in FORWARD OUTPUT; do
      iptables -w -C "${hook}" -j "${EGRESS_GUARD_CHAIN}" 2>/dev/null || iptables -w -I "${hook}" 1 -j "${EGRESS_GUARD_CHAIN}"
    done
    for r in "${rules[@]}"; do
      # shellcheck disable=SC2086 # each rule is words we built above
      iptables -w -C "${EGRESS_GUARD_CHAIN}" ${r} 2>/dev/null || iptables -w -A "${EGRESS_GUARD_CHAIN}" ${r}
    done
    return 0
  fi
  for r in "${rules[@]}"; do
    # shellcheck disable=SC2086
    while iptables -w -D "${EGRESS_GUARD_CHAIN}" ${r} 2>/dev/null; do :; done
  done
  if [[ "$(iptables -w -S "${EGRESS_GUARD_CHAIN}" 2>/dev/null | grep -c '^-A')" == 0 ]]; then
    for hook in FORWARD OUTPUT; do
      while iptables -w -D "${hook}" -j "${EGRESS_GUARD_CHAIN}" 2>/dev/null; do :; done
    done
    iptables -w -X "${EGRESS_GUARD_CHAIN}" 2>/dev/null || true
  fi
}
