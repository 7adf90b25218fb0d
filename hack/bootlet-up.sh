#!/usr/bin/env bash
# `make up` glue: runs `bootlet daemon` in the background against the private
# containerd that `make up` started, the way a systemd unit would on a node.
#
#   hack/bootlet-up.sh start LIBDIR RUNDIR NODE
#   hack/bootlet-up.sh stop|kill|report LIBDIR RUNDIR
#
# start runs the daemon with the whole single-master lifecycle on, the flags
# of the lifecycle e2e test (e2e/lifecycle_master_test.go), the same at every
# start (the first boot and after each reboot):
#   - the bootstrap pods come from --manifests-dir LIBDIR/assets/bootstrap-manifests
#     (render's), applied at every start; once the pivot is done, its record
#     (LIBDIR/bootlet/pivot-done.json) keeps the withdrawn bootstrap
#     apiserver, controller-manager and scheduler out, etcd stays;
#   - the handoff to the kubelet of hack/kubelet-up.sh: its healthz (default
#     port 10248), its staticPodPath LIBDIR/manifests and root dir
#     LIBDIR/kubelet;
#   - the pivot to self-hosted with render's admin.conf and self-hosted/;
#   - the checkpointer, with its own bootlet-checkpointer.conf (render's
#     system:bootlet-checkpointer and its kube-system Role), reading the
#     container runtime, not the kubelet's API, while the apiserver is down;
#   - the upgrade's node agent on hack/kubelet-up.sh's kubelet: its file
#     LIBDIR/bin/kubelet, restarted with `kubelet-up.sh restart`.
# stop is SIGTERM (the pods keep running, by design); kill is SIGKILL (a
# power loss: make reboot).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CMD="${1:-}" LIB="${2:-}" RUN="${3:-}" NODE="${4:-}"
[[ -n "${CMD}" && -n "${LIB}" && -n "${RUN}" ]] || { sed -n '5,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
PID="${RUN}/bootlet.pid"
SOCK="${RUN}/bootlet.sock"
ASSETS="${LIB}/assets"
export BOOTLET_SERVER="unix://${SOCK}"

running_pid() { pidfile_pid "${PID}" "--socket ${SOCK}"; }

case "${CMD}" in
start)
  [[ -n "${NODE}" ]] || { echo "usage: $0 start LIBDIR RUNDIR NODE" >&2; exit 2; }
  if pid="$(running_pid)"; then
    echo "bootlet already running (pid ${pid})"
    exit 0
  fi
  [[ -f "${ASSETS}/admin.conf" && -d "${ASSETS}/bootstrap-manifests" ]] || die "no assets in ${ASSETS}: render first"
  mkdir -p "${LIB}/bootlet" "${LIB}/logs" "${LIB}/manifests" "${LIB}/kubelet" "${RUN}"
  echo "--- bootlet start $(date -u +%FT%TZ)" >>"${LIB}/bootlet.log"
  setsid "${BIN}/bootlet" daemon \
    --runtime-endpoint "unix://${RUN}/containerd.sock" \
    --root-dir "${LIB}/bootlet" \
    --node-name "${NODE}" \
    --pod-log-dir "${LIB}/logs" \
    --container-log-dir "${LIB}/containers" \
    --socket "${SOCK}" \
    --preload-images "${REPO_ROOT}/_output/images" \
    --manifests-dir "${ASSETS}/bootstrap-manifests" \
    --kubelet-healthz-url http://127.0.0.1:10248/healthz \
    --kubelet-static-pod-path "${LIB}/manifests" \
    --kubelet-root-dir "${LIB}/kubelet" \
    --pivot-kubeconfig "${ASSETS}/admin.conf" \
    --self-hosted-assets "${ASSETS}/self-hosted" \
    --checkpointer-kubeconfig "${ASSETS}/bootlet-checkpointer.conf" \
    --kubelet-binary "${LIB}/bin/kubelet" \
    --kubelet-restart-command "${REPO_ROOT}/hack/kubelet-up.sh restart ${LIB} ${RUN} ${NODE}" \
    >>"${LIB}/bootlet.log" 2>&1 </dev/null &
  echo $! >"${PID}"
  for _ in $(seq 1 300); do
    if curl -sf --unix-socket "${SOCK}" http://bootlet/readyz >/dev/null 2>&1; then
      echo "bootlet up: pid $(cat "${PID}") socket ${SOCK} log ${LIB}/bootlet.log"
      exit 0
    fi
    kill -0 "$(cat "${PID}")" 2>/dev/null || { tail -20 "${LIB}/bootlet.log" >&2; exit 1; }
    sleep 0.2
  done
  echo "bootlet did not become ready within 60s; see ${LIB}/bootlet.log" >&2
  exit 1
  ;;
stop|kill)
  # stop: SIGTERM (pods keep running, by design), then wait for the exit so
  # that `make down` removes the state only once the daemon stopped writing
  # it. kill: SIGKILL at once, as a power loss.
  if pid="$(running_pid)"; then
    [[ "${CMD}" == kill ]] || kill "${pid}" 2>/dev/null || true
    [[ "${CMD}" == kill ]] || wait_gone "${pid}" 100 || true
    kill -9 "${pid}" 2>/dev/null || true
    wait_gone "${pid}" 150 || die "bootlet (pid ${pid}) did not exit"
    echo "bootlet stopped (pid ${pid}, ${CMD})"
  fi
  rm -f "${PID}"
  ;;
report)
  for _ in $(seq 1 60); do
    if ! "${BIN}/bootlet" get pods -A 2>/dev/null | tail -n +2 | grep -qv Running; then break; fi
    sleep 0.5
  done
  "${BIN}/bootlet" get pods -A -o wide
  cat <<EOM

bootlet is running. Talk to it with:
  export BOOTLET_SERVER=${BOOTLET_SERVER}
  ${BIN}/bootlet get pods -A
  ${BIN}/bootlet logs hello
  ${BIN}/bootlet apply -f manifests/examples/
State: ${LIB}   Sockets: ${RUN}   Stop and clean up: make down
EOM
  ;;
*) sed -n '5,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
