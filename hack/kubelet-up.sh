#!/usr/bin/env bash
# `make up` glue: runs the real kubelet (_output/bin/kubelet) in the
# background as this node's kubelet, the way its systemd unit would, against
# the private containerd that `make up` started, registered with the
# apiserver through render's kubelet.conf.
#
#   hack/kubelet-up.sh start|stop|kill|restart LIBDIR RUNDIR NODE
#
# start  starts the kubelet with render's LIBDIR/assets/kubelet-config.yaml (pidfile
#        RUNDIR/kubelet.pid, log LIBDIR/kubelet.log, root dir LIBDIR/kubelet),
#        then waits until its healthz answers ok; a no-op when it runs. It runs
#        LIBDIR/bin/kubelet, the node's own copy of _output/bin/kubelet (made at
#        the first start), as the unit runs /usr/local/libexec/bootlet/kubelet:
#        the file an upgrade's node agent replaces (bootlet --kubelet-binary).
# restart  stop, then start: systemctl restart's part, which the node agent
#        runs (bootlet --kubelet-restart-command).
# stop   SIGTERM, SIGKILL after 10 s (its pods keep running in containerd).
# kill   SIGKILL at once (a power loss: `make reboot`).
# Both stop and kill put back the kernel tunables the kubelet rewrote at its
# start and drop its links in /var/log/containers (see below).
#
# The configuration is render's (LIBDIR/assets/kubelet-config.yaml, written
# by `bootlet render` from manifests/kubelet.go, the generator the e2e
# framework uses too): the kubelet's default ports, its API on every address
# (the apiserver reaches it at the node's InternalIP for `kubectl logs/exec`)
# but authenticated and authorized as kubeadm's: no anonymous requests,
# client certificates of pki/kubelet-client-ca only (which signs the
# apiserver's kubelet client and nothing else), bearer tokens and every
# request reviewed by the apiserver (Webhook). bootlet itself never calls the
# kubelet's API. It keeps the kubelet's eviction, local storage and image GC
# defaults, as every node does: nothing here overrides them (this machine's
# disk is well within them; see warn_disk).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CMD="${1:-}" LIB="${2:-}" RUN="${3:-}" NODE="${4:-}"
[[ -n "${CMD}" && -n "${LIB}" && -n "${RUN}" ]] || { echo "usage: $0 start|stop|kill LIBDIR RUNDIR NODE" >&2; exit 2; }

PID="${RUN}/kubelet.pid"
KUBELET_BIN="${LIB}/bin/kubelet"
ROOT="${LIB}/kubelet"
CONFIG="${LIB}/assets/kubelet-config.yaml"
LOGFILE="${LIB}/kubelet.log"
# Saved before the first start, put back at stop (persistent, so that
# `make down` after a lost RUNDIR still restores them).
SYSCTLS_SAVED="${LIB}/kubelet.sysctls"

# The kubelet's container manager rewrites these at start
# (setupKernelTunables with protectKernelDefaults=false: vm.overcommit_memory=1,
# kernel.panic=10, kernel.panic_on_oops=1); protectKernelDefaults=true would
# make it refuse to start on this VM instead. They are saved before it starts
# and put back when it stops: a host must not be left panicking on oops by a
# `make down`. On a real reboot the kernel starts from its defaults anyway.
# The last four are kube-proxy's, a pod this kubelet runs (its conntrack
# settings, and route_localnet for NodePorts on localhost): `make down`
# leaves the host's network as `make up` found it.
SYSCTLS=(vm/overcommit_memory kernel/panic kernel/panic_on_oops
  net/ipv4/conf/all/route_localnet net/netfilter/nf_conntrack_max
  net/netfilter/nf_conntrack_tcp_timeout_established net/netfilter/nf_conntrack_tcp_timeout_close_wait)

# warn_disk: the kubelet evicts pods once its file system has less than 10%
# available (15% for the images'), and removes unused images once more than
# 85% is used; this node's images come from archives and cannot be pulled
# again. Said before it starts, rather than found as evicted pods later.
warn_disk() {
  local size avail
  read -r size avail < <(df --output=size,avail "${ROOT}" | tail -n 1)
  [[ "${size}" =~ ^[0-9]+$ && "${avail}" =~ ^[0-9]+$ && "${size}" -gt 0 ]] || return 0
  if (( avail * 100 < size * 20 )); then
    echo "warning: ${ROOT} has $((avail * 100 / size))% of its file system available: the kubelet evicts pods under 15% and removes unused images over 85% used" >&2
  fi
  return 0
}

running_pid() { pidfile_pid "${PID}" "--root-dir ${ROOT} "; }

healthz() { curl -sf --max-time 2 http://127.0.0.1:10248/healthz 2>/dev/null | grep -qx ok; }

save_sysctls() {
  [[ -f "${SYSCTLS_SAVED}" ]] && return 0
  local s
  for s in "${SYSCTLS[@]}"; do
    echo "${s}=$(cat "/proc/sys/${s}")"
  done > "${SYSCTLS_SAVED}.tmp"
  mv "${SYSCTLS_SAVED}.tmp" "${SYSCTLS_SAVED}"
}

restore_sysctls() {
  [[ -f "${SYSCTLS_SAVED}" ]] || return 0
  local k v
  while IFS='=' read -r k v; do
    if [[ -n "${k}" ]]; then echo "${v}" > "/proc/sys/${k}" 2>/dev/null || true; fi
  done < "${SYSCTLS_SAVED}"
  rm -f "${SYSCTLS_SAVED}"
}

# The kubelet's log manager also links every container log into the
# hard-coded /var/log/containers; drop the links into our pod log dir.
drop_log_links() {
  local l
  for l in /var/log/containers/*.log; do
    [[ -L "${l}" ]] || continue
    [[ "$(readlink "${l}")" == "${LIB}/logs/"* ]] && rm -f "${l}"
  done
  return 0
}

after_exit() {
  rm -f "${PID}"
  if [[ -x "${BIN}/bootlet" ]]; then "${BIN}/bootlet" kubelet-gate --dir "${RUN}" --stopped || true; fi
  drop_log_links
  restore_sysctls
}

stop_kubelet() {
  if pid="$(running_pid)"; then
    if [[ "$1" == stop ]]; then
      kill -TERM "${pid}" 2>/dev/null || true
      wait_gone "${pid}" 100 || kill -KILL "${pid}" 2>/dev/null || true
    else
      kill -KILL "${pid}" 2>/dev/null || true
    fi
    wait_gone "${pid}" 150 || die "the kubelet (pid ${pid}) did not exit"
    echo "kubelet stopped (pid ${pid}, $1)"
  fi
  after_exit
}

case "${CMD}" in
restart)
  [[ -n "${NODE}" ]] || { echo "usage: $0 restart LIBDIR RUNDIR NODE" >&2; exit 2; }
  stop_kubelet stop
  exec "$0" start "${LIB}" "${RUN}" "${NODE}"
  ;;
start)
  [[ -n "${NODE}" ]] || { echo "usage: $0 start LIBDIR RUNDIR NODE" >&2; exit 2; }
  if pid="$(running_pid)"; then
    echo "kubelet already running (pid ${pid})"
    exit 0
  fi
  [[ -x "${BIN}/kubelet" ]] || die "no ${BIN}/kubelet: run make toolchain"
  if [[ ! -x "${KUBELET_BIN}" ]]; then
    mkdir -p "${LIB}/bin"
    install -m 0755 "${BIN}/kubelet" "${KUBELET_BIN}.tmp"
    mv "${KUBELET_BIN}.tmp" "${KUBELET_BIN}"
  fi
  [[ -f "${LIB}/assets/kubelet.conf" && -f "${CONFIG}" ]] || die "no ${LIB}/assets/kubelet.conf or ${CONFIG}: render first"
  mkdir -p "${ROOT}" "${LIB}/manifests" "${LIB}/logs" "${RUN}"
  warn_disk
  save_sysctls
  # The handoff's start gate, as bootlet-kubelet.service's ExecStartPre:
  # bootlet leaves the pods it is about to start to this kubelet, and this
  # waits until none of its container starts is under way (never fails).
  if [[ -x "${BIN}/bootlet" ]]; then "${BIN}/bootlet" kubelet-gate --dir "${RUN}" || true; fi
  echo "--- kubelet start $(date -u +%FT%TZ)" >> "${LOGFILE}"
  setsid "${KUBELET_BIN}" --config "${CONFIG}" --root-dir "${ROOT}" --hostname-override "${NODE}" \
    --cert-dir "${ROOT}/pki" --kubeconfig "${LIB}/assets/kubelet.conf" -v=2 \
    >>"${LOGFILE}" 2>&1 < /dev/null &
  pid=$!
  echo "${pid}" > "${PID}"
  for _ in $(seq 1 600); do
    if healthz; then
      echo "kubelet up: pid ${pid} node ${NODE} root ${ROOT} config ${CONFIG} log ${LOGFILE}"
      exit 0
    fi
    if ! kill -0 "${pid}" 2>/dev/null; then
      tail -n 30 "${LOGFILE}" >&2
      after_exit
      die "the kubelet exited during its start; see ${LOGFILE}"
    fi
    sleep 0.1
  done
  tail -n 30 "${LOGFILE}" >&2
  die "the kubelet's healthz did not answer ok within 60s; see ${LOGFILE}"
  ;;
stop|kill)
  stop_kubelet "${CMD}"
  ;;
*) echo "usage: $0 start|stop|kill|restart LIBDIR RUNDIR NODE" >&2; exit 2 ;;
esac
