#!/usr/bin/env bash
# `make up` / `make down`: a single-node Kubernetes control plane (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler) run by bootlet
# straight through a private containerd: no kubelet, no temporary apiserver.
#
#   hack/up.sh up   LIBDIR RUNDIR    (make up:   LIBDIR=/var/lib/bootlet-up RUNDIR=/run/bootlet-up)
#   hack/up.sh down LIBDIR RUNDIR    (make down)
#
# up, step by step (each step is a no-op when already done, so a re-run only
# waits for the control plane and prints the kubeconfig again):
#   1. the private containerd (hack/containerd.sh) on RUNDIR/containerd.sock,
#      root LIBDIR/containerd, and `bootlet daemon` (hack/bootlet-up.sh) on
#      RUNDIR/bootlet.sock, root LIBDIR/bootlet, pod logs LIBDIR/logs;
#   2. imports _output/images/control-plane/*.tar unless containerd has them;
#   3. `bootlet render` into LIBDIR/assets (PKI, kubeconfigs, bootstrap pods),
#      etcd data in LIBDIR/etcd; re-rendering keeps the keys;
#   4. `bootlet apply -f LIBDIR/assets/bootstrap-manifests/`;
#   5. waits, printing each change, until kube-apiserver /readyz is ok and
#      kube-controller-manager and kube-scheduler hold their kube-system
#      Leases; then writes LIBDIR/admin.kubeconfig and prints how to use it.
# down stops bootlet, containerd and every container process of it, removes
# iptables rules and the bridge, unmounts everything under LIBDIR and
# RUNDIR, removes both, and fails if any process or mount is left.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CP_IMAGES="${REPO_ROOT}/_output/images/control-plane"

CMD="${1:-}" LIB="${2:-}" RUN="${3:-}"
[[ -n "${CMD}" && -n "${LIB}" && -n "${RUN}" ]] || { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[[ "${LIB}" == /* && "${RUN}" == /* && "${LIB}" != / && "${RUN}" != / ]] || { echo "up.sh: LIBDIR and RUNDIR must be absolute, not /" >&2; exit 2; }

CTRD="${RUN}/containerd.sock"
SOCK="${RUN}/bootlet.sock"
ASSETS="${LIB}/assets"
ETCD_DATA="${LIB}/etcd"
KUBECONFIG_OUT="${LIB}/admin.kubeconfig"
# The bootstrap pods' host ports (hostNetwork): apiserver, etcd client, peer
# and metrics, controller-manager and scheduler secure ports.
PORTS=(6443 2379 2380 2381 10257 10259)
WAIT_TIMEOUT="${UP_TIMEOUT:-600}"
export BOOTLET_SERVER="unix://${SOCK}"

START=$(date +%s.%N)
since() { awk -v a="${START}" -v b="$(date +%s.%N)" 'BEGIN { printf "%5.1fs", b - a }'; }
say() { echo "[$(since)] $*"; }
die() { echo "up.sh: $*" >&2; exit 1; }

# ours PID: true when PID descends from a containerd shim of our containerd,
# i.e. it is one of our bootstrap pods' processes.
ours() {
  local p="$1" cl
  while [[ -n "${p}" && "${p}" -gt 1 ]]; do
    cl="$(tr '\0' ' ' < "/proc/${p}/cmdline" 2>/dev/null)" || return 1
    if [[ "${cl}" == *containerd-shim-runc-v2* && " ${cl} " == *" -address ${CTRD} "* ]]; then
      return 0
    fi
    p="$(awk '/^PPid:/ {print $2}' "/proc/${p}/status" 2>/dev/null)" || return 1
  done
  return 1
}

# check_ports: the control plane needs its host ports; fail loudly naming the
# process that holds one, unless it is one of ours (a re-run).
check_ports() {
  local port line pid bad=0
  for port in "${PORTS[@]}"; do
    line="$(ss -Hltnp "sport = :${port}" 2>/dev/null | head -n1)"
    [[ -n "${line}" ]] || continue
    pid="$(sed -n 's/.*pid=\([0-9]*\).*/\1/p' <<<"${line}" | head -n1)"
    if [[ -n "${pid}" ]] && ours "${pid}"; then
      continue
    fi
    echo "up.sh: host port ${port} is taken by: ${line}" >&2
    bad=1
  done
  [[ ${bad} -eq 0 ]] || die "the control plane needs ports ${PORTS[*]}; stop what holds them (another cluster, a test, an earlier run outside make up) and retry"
}

node_name() { hostname | tr '[:upper:]' '[:lower:]'; }

advertise_address() {
  local a
  a="$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -n1)"
  [[ -n "${a}" ]] || a="$(hostname -I 2>/dev/null | awk '{print $1}')"
  [[ -n "${a}" ]] || die "no IPv4 address to advertise (no default route); set UP_ADVERTISE_ADDRESS"
  echo "${a}"
}

have_images() {
  local want have
  have="$("${BIN}/ctr" --address "${CTRD}" -n k8s.io images ls -q 2>/dev/null)" || return 1
  for want in kube-apiserver:v1.36.3 kube-controller-manager:v1.36.3 kube-scheduler:v1.36.3 etcd:3.6.8-0; do
    grep -qx "registry.k8s.io/${want}" <<<"${have}" || return 1
  done
}

kubectl_admin() { "${BIN}/kubectl" --kubeconfig "${ASSETS}/admin.conf" --request-timeout=3s "$@"; }

# status_line: one line saying how far the control plane is.
status_line() {
  local pods readyz cm sched
  pods="$("${BIN}/bootlet" get pods -n kube-system 2>/dev/null |
    awk -v node="$(node_name)" 'NR > 1 {
      n = $1; k = length(node)
      if (substr(n, length(n) - k) == "-" node) n = substr(n, 1, length(n) - k - 1)
      sub(/^kube-/, "", n); printf "%s %s %s  ", n, $2, $3 }')"
  readyz="$(kubectl_admin get --raw /readyz 2>/dev/null | head -c 20)" || true
  cm="$(kubectl_admin -n kube-system get lease kube-controller-manager -o 'jsonpath={.spec.holderIdentity}' 2>/dev/null)" || true
  sched="$(kubectl_admin -n kube-system get lease kube-scheduler -o 'jsonpath={.spec.holderIdentity}' 2>/dev/null)" || true
  # A lease names its holder; the line says only whether one is held.
  [[ -n "${cm}" ]] && cm=held || cm=free
  [[ -n "${sched}" ]] && sched=held || sched=free
  echo "pods: ${pods:-none yet} | apiserver readyz: ${readyz:-no answer} | leases: controller-manager ${cm}, scheduler ${sched}"
}

cmd_up() {
  say "bootlet control plane: state ${LIB}, sockets ${RUN}"
  mkdir -p "${LIB}" "${RUN}"
  [[ -x "${BIN}/bootlet" && -x "${BIN}/bootlet-tools" && -x "${BIN}/kubectl" ]] || die "run make build toolchain first"
  ls "${CP_IMAGES}"/*.tar >/dev/null 2>&1 || die "no control-plane images in ${CP_IMAGES}: run make images"
  # Before anything starts, so that a foreign apiserver or etcd is named
  # instead of surfacing later as a crash-looping pod.
  check_ports

  "${HACK}/containerd.sh" up --root "${LIB}/containerd" --state "${RUN}/containerd" --address "${CTRD}" \
    --log "${LIB}/containerd.log" | sed "s/^/[$(since)] /"
  "${HACK}/bootlet-up.sh" start "${LIB}" "${RUN}" | sed "s/^/[$(since)] /"

  if have_images; then
    say "control-plane images already in containerd"
  else
    say "importing the control-plane images (${CP_IMAGES})"
    "${BIN}/bootlet" images import --address "${CTRD}" "${CP_IMAGES}" | sed "s/^/         /"
    have_images || die "control-plane images missing after the import"
  fi

  local node addr
  node="$(node_name)"
  addr="${UP_ADVERTISE_ADDRESS:-$(advertise_address)}"
  say "rendering assets into ${ASSETS} (node ${node}, advertise address ${addr}, etcd data ${ETCD_DATA})"
  "${BIN}/bootlet" render --asset-dir "${ASSETS}" --node-name "${node}" --advertise-address "${addr}" \
    --etcd-data-dir "${ETCD_DATA}" >/dev/null

  say "applying ${ASSETS}/bootstrap-manifests/ through bootlet's API"
  "${BIN}/bootlet" apply -f "${ASSETS}/bootstrap-manifests/" | sed "s/^/         /"

  local deadline last="" line
  deadline=$(( $(date +%s) + WAIT_TIMEOUT ))
  while :; do
    line="$(status_line)"
    [[ "${line}" == "${last}" ]] || say "${line}"
    last="${line}"
    if [[ "${line}" == *"readyz: ok"* && "${line}" == *"controller-manager held, scheduler held"* ]]; then
      break
    fi
    if [[ $(date +%s) -gt ${deadline} ]]; then
      "${BIN}/bootlet" get pods -n kube-system -o wide >&2 || true
      die "the control plane was not up after ${WAIT_TIMEOUT}s; see \`${BIN}/bootlet logs -n kube-system POD\` and ${LIB}/bootlet.log"
    fi
    sleep 1
  done

  install -m 0600 "${ASSETS}/admin.conf" "${KUBECONFIG_OUT}"
  say "control plane up"
  "${BIN}/bootlet" get pods -n kube-system -o wide
  cat <<EOM

The control plane runs as bootlet pods (no kubelet). Use it with:
  export KUBECONFIG=${KUBECONFIG_OUT}
  ${BIN}/kubectl get --raw /readyz
  ${BIN}/kubectl get leases -n kube-system
  ${BIN}/kubectl create namespace demo
The pods themselves, through bootlet's API:
  export BOOTLET_SERVER=${BOOTLET_SERVER}
  ${BIN}/bootlet get pods -n kube-system
  ${BIN}/bootlet logs -n kube-system kube-apiserver
  ${BIN}/bootlet apply -f manifests/examples/      (or: make up-examples)
Assets (PKI, kubeconfigs, manifests): ${ASSETS}   Logs: ${LIB}/logs, ${LIB}/bootlet.log
Stop everything and remove all state: make down
EOM
}

# leftovers: processes whose root, cwd or command line is under LIB or RUN
# (container processes have their root under RUN/containerd), except this
# script's own shells. One find and one grep over /proc: a loop of readlinks
# per process takes most of a minute on a loaded machine.
leftovers() {
  {
    find /proc -mindepth 2 -maxdepth 2 \( -name root -o -name cwd \) \
      \( -lname "${LIB}" -o -lname "${LIB}/*" -o -lname "${RUN}" -o -lname "${RUN}/*" \) 2>/dev/null | cut -d/ -f3
    grep -lsaF -e "${LIB}" -e "${RUN}" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3 |
      while read -r p; do grep -qaF hack/up.sh "/proc/${p}/cmdline" 2>/dev/null || echo "${p}"; done
  } | sort -un | while read -r p; do
    # Not the find and grep above (their arguments name LIB), not an
    # ancestor of this script (a shell that ran make down with the paths).
    [[ -d "/proc/${p}" ]] || continue
    [[ " $(ancestors) " == *" ${p} "* ]] || echo "${p}"
  done
}

ancestors() {
  local p=$$
  while [[ -n "${p}" && "${p}" -gt 1 ]]; do
    echo -n "${p} "
    p="$(awk '/^PPid:/ {print $2}' "/proc/${p}/status" 2>/dev/null)"
  done
}

mounts_under() {
  awk -v a="${LIB}" -v b="${RUN}" '$2 == a || index($2, a "/") == 1 || $2 == b || index($2, b "/") == 1 {print $2}' /proc/self/mounts
}

cmd_down() {
  "${HACK}/bootlet-up.sh" stop "${LIB}" "${RUN}"
  # Kills containerd and every shim of it with the container processes, drops
  # the CNI iptables rules and the bridge, unmounts under its root and state.
  "${HACK}/containerd.sh" down --address "${CTRD}" --root "${LIB}/containerd" --state "${RUN}/containerd" --purge
  local pids
  pids="$(leftovers | tr '\n' ' ')"
  if [[ -n "${pids// /}" ]]; then
    echo "killing leftover processes: ${pids}"
    # shellcheck disable=SC2086
    kill -9 ${pids} 2>/dev/null || true
    sleep 0.5
  fi
  local m
  mounts_under | sort -r | while read -r m; do
    m="$(printf '%b' "${m}")"
    umount "${m}" 2>/dev/null || umount -l "${m}" 2>/dev/null || true
  done
  rm -rf "${LIB}" "${RUN}"
  pids="$(leftovers | tr '\n' ' ')"
  [[ -z "${pids// /}" ]] || die "processes left after make down: ${pids}"
  [[ -z "$(mounts_under)" ]] || die "mounts left after make down: $(mounts_under | tr '\n' ' ')"
  [[ ! -e "${LIB}" && ! -e "${RUN}" ]] || die "state left after make down"
  echo "down: no process, mount or state left under ${LIB} or ${RUN}"
}

case "${CMD}" in
  up) cmd_up ;;
  down) cmd_down ;;
  *) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
