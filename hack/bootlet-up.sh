#!/usr/bin/env bash
# `make up` glue: runs `bootlet daemon` in the background against the private
# containerd that `make up` started, the way a systemd unit would on a node.
#
#   hack/bootlet-up.sh start|stop|report LIBDIR RUNDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CMD="$1" LIB="$2" RUN="$3"
PID="${RUN}/bootlet.pid"
SOCK="${RUN}/bootlet.sock"
export BOOTLET_SERVER="unix://${SOCK}"

case "${CMD}" in
start)
  if [[ -f "${PID}" ]] && kill -0 "$(cat "${PID}")" 2>/dev/null; then
    echo "bootlet already running (pid $(cat "${PID}"))"
    exit 0
  fi
  mkdir -p "${LIB}/bootlet" "${LIB}/logs" "${LIB}/manifests" "${LIB}/kubelet"
  nohup "${BIN}/bootlet" daemon \
    --runtime-endpoint "unix://${RUN}/containerd.sock" \
    --root-dir "${LIB}/bootlet" \
    --pod-log-dir "${LIB}/logs" \
    --container-log-dir "${LIB}/containers" \
    --kubelet-static-pod-path "${LIB}/manifests" \
    --kubelet-root-dir "${LIB}/kubelet" \
    --socket "${SOCK}" \
    --preload-images "${REPO_ROOT}/_output/images" \
    >"${LIB}/bootlet.log" 2>&1 &
  echo $! >"${PID}"
  for _ in $(seq 1 100); do
    if curl -sf --unix-socket "${SOCK}" http://bootlet/readyz >/dev/null 2>&1; then
      echo "bootlet up: pid $(cat "${PID}") socket ${SOCK} log ${LIB}/bootlet.log"
      exit 0
    fi
    kill -0 "$(cat "${PID}")" 2>/dev/null || { tail -20 "${LIB}/bootlet.log" >&2; exit 1; }
    sleep 0.2
  done
  echo "bootlet did not become ready; see ${LIB}/bootlet.log" >&2
  exit 1
  ;;
stop)
  # SIGTERM (pods keep running, by design), then wait for the exit so that
  # `make down` removes the state only once the daemon stopped writing it.
  if [[ -f "${PID}" ]]; then
    pid="$(cat "${PID}")"
    if tr '\0' ' ' < "/proc/${pid}/cmdline" 2>/dev/null | grep -qF -- "--socket ${SOCK}"; then
      kill "${pid}" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
      kill -9 "${pid}" 2>/dev/null || true
    fi
    rm -f "${PID}"
  fi
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
*) echo "usage: $0 start|stop|report LIBDIR RUNDIR" >&2; exit 2 ;;
esac
