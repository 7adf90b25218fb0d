#!/usr/bin/env bash
# `make up` / `make reboot` / `make down`: a single-node Kubernetes control
# plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)
# through its whole first boot: bootlet runs the bootstrap pods straight
# through a private containerd, the real kubelet adopts them, and the control
# plane pivots to its self-hosted DaemonSet and Deployments, with bootlet
# left as the checkpointer (docs/handoff.md).
#
#   hack/up.sh up     LIBDIR RUNDIR  (make up:  LIBDIR=/var/lib/bootlet-up RUNDIR=/run/bootlet-up)
#   hack/up.sh reboot LIBDIR RUNDIR  (make reboot)
#   hack/up.sh down   LIBDIR RUNDIR  (make down)
#
# up, step by step (each step is a no-op when already done, so a re-run only
# waits for the control plane and prints the kubeconfig again):
#   1. the private containerd (hack/containerd.sh) on RUNDIR/containerd.sock,
#      root LIBDIR/containerd;
#   2. imports _output/images/control-plane/*.tar unless containerd has them;
#   3. `bootlet render` into LIBDIR/assets (PKI, kubeconfigs, bootstrap pods,
#      self-hosted objects), etcd data in LIBDIR/etcd; re-rendering keeps the
#      keys;
#   4. `bootlet daemon` (hack/bootlet-up.sh) on RUNDIR/bootlet.sock, root
#      LIBDIR/bootlet, with --manifests-dir LIBDIR/assets/bootstrap-manifests
#      and the handoff, pivot and checkpointer on;
#   5. waits, printing each change, until kube-apiserver /readyz is ok and
#      kube-controller-manager and kube-scheduler hold their kube-system
#      Leases;
#   6. the kubelet (hack/kubelet-up.sh), registered as this node;
#   7. waits until the kubelet adopted the four bootstrap pods (owner
#      kubelet-static), then until the control plane is self-hosted: a
#      self-hosted apiserver, controller-manager and scheduler pod Running and
#      Ready on this node, the bootstrap ones withdrawn (bootlet's pivot
#      record), the apiserver's checkpoint stored, no checkpoint running;
#   8. writes LIBDIR/admin.kubeconfig and prints the times and how to use it.
# reboot is a power cycle of the node: the kubelet, bootlet and containerd
# get SIGKILL, every container process is killed, every mount under LIBDIR
# and RUNDIR goes, RUNDIR (containerd's state, sockets, pidfiles) is wiped
# and the pod bridge deleted; LIBDIR is kept. Then containerd, bootlet and the
# kubelet start in that order, and it waits until the apiserver answers
# /readyz and then until the control plane is self-hosted again.
# down stops the kubelet, bootlet, containerd and every container process of
# it, removes iptables rules and the bridge, unmounts everything under LIBDIR
# and RUNDIR, removes both, and fails if any process or mount is left.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CP_IMAGES="${REPO_ROOT}/_output/images/control-plane"
ADDON_IMAGES="${REPO_ROOT}/_output/images/addons"

usage() { sed -n '8,11p' "$0" | sed 's/^# \{0,1\}//'; }
CMD="${1:-}" LIB="${2:-}" RUN="${3:-}"
[[ -n "${CMD}" && -n "${LIB}" && -n "${RUN}" ]] || { usage >&2; exit 2; }
# Both are removed with rm -rf by down (and RUNDIR by reboot): only a
# canonical, dedicated bootlet* directory is accepted (lib.sh).
LIB="$(dedicated_dir "${LIB}")" || exit 2
RUN="$(dedicated_dir "${RUN}")" || exit 2
[[ "${LIB}" != "${RUN}" && "${LIB}/" != "${RUN}/"* && "${RUN}/" != "${LIB}/"* ]] || { echo "up.sh: LIBDIR and RUNDIR must not overlap" >&2; exit 2; }

CTRD="${RUN}/containerd.sock"
SOCK="${RUN}/bootlet.sock"
ASSETS="${LIB}/assets"
ETCD_DATA="${LIB}/etcd"
KUBECONFIG_OUT="${LIB}/admin.kubeconfig"
PIVOT_DONE="${LIB}/bootlet/pivot-done.json"
# The pod network (flannel) and the Services (kube-proxy), render's
# defaults; the node's CNI directories live with its state, as /etc/cni and
# /opt/cni/bin do on a real node, and flannel's subnet.env under RUNDIR,
# as /run/flannel does (gone at a reboot).
POD_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/12
CNI_DIR="${LIB}/cni"
NODE="$(up_node_name)"
# The bootstrap pods' host ports (hostNetwork): apiserver, etcd client, peer
# and metrics, controller-manager and scheduler secure ports; and the
# kubelet's healthz and API.
PORTS=(6443 2379 2380 2381 10257 10259 10248 10250)
# The components the pivot hands over to self-hosted pods (etcd stays a
# static pod of the kubelet).
PIVOTED=(kube-apiserver kube-controller-manager kube-scheduler)
WAIT_TIMEOUT="${UP_TIMEOUT:-900}"
export BOOTLET_SERVER="unix://${SOCK}"

START=$(date +%s.%N)
since() { awk -v a="${START}" -v b="$(date +%s.%N)" 'BEGIN { printf "%5.1fs", b - a }'; }
say() { echo "[$(since)] $*"; }
die() { echo "up.sh: $*" >&2; exit 1; }
# secs T0 [T1]: seconds from T0 to T1 (default now), one decimal.
secs() { awk -v a="$1" -v b="${2:-$(date +%s.%N)}" 'BEGIN { printf "%.1f", b - a }'; }

# ours PID: true when PID is our kubelet or descends from a containerd shim
# of our containerd, i.e. it is one of our control-plane pods' processes.
ours() {
  local p="$1" cl
  [[ -f "${RUN}/kubelet.pid" && "$(cat "${RUN}/kubelet.pid")" == "${p}" ]] && return 0
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
  for want in kube-apiserver:v1.36.3 kube-controller-manager:v1.36.3 kube-scheduler:v1.36.3 etcd:3.6.8-0 \
    kube-proxy:v1.36.3 coredns/coredns:v1.14.2; do
    grep -qx "registry.k8s.io/${want}" <<<"${have}" || return 1
  done
  for want in flannel:v0.28.10 flannel-cni-plugin:v0.9.1; do
    grep -qx "ghcr.io/flannel-io/${want}" <<<"${have}" || return 1
  done
}

# addons_line: the node's Ready condition and the add-ons' readiness (ready
# pods of flannel, kube-proxy and CoreDNS, each counted only when Ready
# since READY_SINCE). Ends in "add-ons ready" once all are.
addons_line() {
  local node json line="" ok=1 what ns sel r
  node="$(kubectl_admin get node "${NODE}" -o 'jsonpath={range .status.conditions[?(@.type=="Ready")]}{.status}{end}' 2>/dev/null)" || true
  [[ "${node}" == True ]] || ok=0
  for what in "flannel kube-flannel app=flannel" "kube-proxy kube-system k8s-app=kube-proxy" "coredns kube-system k8s-app=kube-dns"; do
    read -r what ns sel <<<"${what}"
    json="$(kubectl_admin get pods -n "${ns}" -l "${sel}" -o json 2>/dev/null)" || json='{"items":[]}'
    r="$(jq -r --argjson since "${READY_SINCE}" '[.items[] | select(.metadata.deletionTimestamp == null and .status.phase == "Running" and ([.status.conditions[]?
        | select(.type == "Ready" and .status == "True" and (.lastTransitionTime | fromdateiso8601) >= $since)] | length > 0))]
        | length' <<<"${json}")"
    [[ "${r}" -gt 0 ]] || ok=0
    line+="${what} ${r} ready  "
  done
  line="node ${NODE} Ready=${node:-?} | ${line}"
  [[ ${ok} -eq 0 ]] || line+="| add-ons ready"
  echo "${line}"
}


kubectl_admin() { "${BIN}/kubectl" --kubeconfig "${ASSETS}/admin.conf" --request-timeout=3s "$@"; }

# bootlet_pods: "NAME OWNER READY" per kube-system pod bootlet runs, NAME
# without the -NODE suffix and OWNER as `bootlet get pods -o wide` shows it.
bootlet_pods() {
  "${BIN}/bootlet" get pods -n kube-system -o json 2>/dev/null | jq -r --arg node "-${NODE}" '.items[]
    | (.metadata.name | if endswith($node) then .[0:(length - ($node | length))] else . end) as $n
    | ([.status.conditions[]? | select(.type == "Ready") | .status][0] // "False") as $ready
    | "\($n) \(.metadata.annotations["bootlet.dev/owner"] // "bootlet") \(.status.phase // "Pending")/\(if $ready == "True" then "ready" else "not-ready" end)"'
}

short() { sed 's/^kube-//'; }

# status_line: one line saying how far the bootstrap control plane is.
status_line() {
  local pods readyz cm sched
  pods="$(bootlet_pods | awk '{ sub(/^kube-/, "", $1); printf "%s %s %s  ", $1, $3, $2 }')"
  readyz="$(kubectl_admin get --raw /readyz 2>/dev/null | head -c 20)" || true
  cm="$(kubectl_admin -n kube-system get lease kube-controller-manager -o 'jsonpath={.spec.holderIdentity}' 2>/dev/null)" || true
  sched="$(kubectl_admin -n kube-system get lease kube-scheduler -o 'jsonpath={.spec.holderIdentity}' 2>/dev/null)" || true
  # A lease names its holder; the line says only whether one is held.
  [[ -n "${cm}" ]] && cm=held || cm=free
  [[ -n "${sched}" ]] && sched=held || sched=free
  echo "bootlet pods: ${pods:-none yet}| apiserver readyz: ${readyz:-no answer} | leases: controller-manager ${cm}, scheduler ${sched}"
}

# adoption_line: who owns each bootstrap pod, and the node as the apiserver
# sees it. "adopted" once bootlet runs none of its pods itself.
adoption_line() {
  local pods node mine
  pods="$(bootlet_pods)"
  mine="$(awk '$2 == "bootlet" {print $1}' <<<"${pods}" | short | tr '\n' ' ')"
  node="$(kubectl_admin get node "${NODE}" -o 'jsonpath={range .status.conditions[?(@.type=="Ready")]}{.status}{end}' 2>/dev/null)" || true
  case "${node}" in True) node=Ready ;; False|Unknown) node=NotReady ;; *) node="not registered" ;; esac
  local state="adopted"
  [[ -z "${mine// /}" && -n "${pods}" ]] || state="waiting for the kubelet to adopt: ${mine:-no pods yet}"
  echo "owners: $(awk '{printf "%s %s  ", $1, $2}' <<<"${pods}" | sed 's/kube-//g')| node ${NODE}: ${node} | ${state}"
}

# READY_SINCE: a self-hosted pod counts as Ready only when its Ready
# condition turned true at or after this time (seconds since the epoch).
# After a reboot it is the power-on: the Ready status etcd kept from before
# the power loss does not count (e2e's waitSelfHosted does the same).
READY_SINCE=0

# selfhosted_line: the self-hosted pods on this node (ready/all per
# component), the bootstrap pods bootlet still runs, the pivot record, the
# apiserver's stored checkpoint and a running checkpoint pod. Ends in
# "self-hosted" once all of it is as it must be.
selfhosted_line() {
  local pods comp counts="" left="" notready=0 ck=none ckpod="" json n r
  pods="$(bootlet_pods)"
  json="$(kubectl_admin get pods -n kube-system --field-selector "spec.nodeName=${NODE}" -o json 2>/dev/null)" || json=""
  for comp in "${PIVOTED[@]}"; do
    if [[ -n "${json}" ]]; then
      read -r n r < <(jq -r --arg c "${comp}" --argjson since "${READY_SINCE}" '[.items[] | select(.metadata.labels["k8s-app"] == $c and .metadata.deletionTimestamp == null)]
        | "\(length) \([.[] | select(.status.phase == "Running" and ([.status.conditions[]?
            | select(.type == "Ready" and .status == "True" and (.lastTransitionTime | fromdateiso8601) >= $since)] | length > 0))] | length)"' <<<"${json}")
    else
      n="?" r=0
    fi
    counts+="$(short <<<"${comp}") ${r}/${n}  "
    [[ "${r}" -gt 0 ]] || notready=1
    grep -q "^${comp} " <<<"${pods}" && left+="$(short <<<"${comp}") "
  done
  grep -q '^kube-apiserver-checkpoint ' <<<"${pods}" && ckpod="; checkpoint pod running"
  if "${BIN}/bootlet" checkpoint show podcheckpoints kube-system/kube-apiserver --root-dir "${LIB}/bootlet" >/dev/null 2>&1; then ck=stored; fi
  local pivot="pivot not done"
  [[ -f "${PIVOT_DONE}" ]] && pivot="pivot done"
  local line="self-hosted ready/pods: ${counts}| bootstrap pods left: ${left:-none} | ${pivot} | apiserver checkpoint ${ck}${ckpod}"
  if [[ -n "${json}" && ${notready} -eq 0 && -z "${left}" && -f "${PIVOT_DONE}" && "${ck}" == stored && -z "${ckpod}" ]]; then
    line+=" | self-hosted"
  fi
  echo "${line}"
}

# wait_for WHAT FUNC PATTERN: prints FUNC's line each time it changes until
# it matches PATTERN (a glob); fails after WAIT_TIMEOUT.
wait_for() {
  local what="$1" fn="$2" pat="$3" deadline last="" line
  deadline=$(( $(date +%s) + WAIT_TIMEOUT ))
  while :; do
    line="$("${fn}")"
    [[ "${line}" == "${last}" ]] || say "${line}"
    last="${line}"
    # shellcheck disable=SC2053
    [[ "${line}" == ${pat} ]] && return 0
    if [[ $(date +%s) -gt ${deadline} ]]; then
      "${BIN}/bootlet" get pods -n kube-system -o wide >&2 || true
      die "${what}: not done after ${WAIT_TIMEOUT}s; see ${LIB}/bootlet.log, ${LIB}/kubelet.log, \`${BIN}/bootlet logs -n kube-system POD\`"
    fi
    sleep 1
  done
}

start_containerd() {
  "${HACK}/containerd.sh" up --root "${LIB}/containerd" --state "${RUN}/containerd" --address "${CTRD}" \
    --log "${LIB}/containerd.log" --cni-conf-dir "${CNI_DIR}/net.d" --cni-bin-dir "${CNI_DIR}/bin" \
    --pod-cidr "${POD_CIDR}" --service-cidr "${SERVICE_CIDR}" | sed "s/^/[$(since)] /"
}
start_bootlet() { "${HACK}/bootlet-up.sh" start "${LIB}" "${RUN}" "${NODE}" | sed "s/^/[$(since)] /"; }
start_kubelet() { "${HACK}/kubelet-up.sh" start "${LIB}" "${RUN}" "${NODE}" | sed "s/^/[$(since)] /"; }

cmd_up() {
  say "bootlet control plane: node ${NODE}, state ${LIB}, sockets ${RUN}"
  mkdir -p "${LIB}" "${RUN}"
  [[ -x "${BIN}/bootlet" && -x "${BIN}/bootlet-tools" && -x "${BIN}/kubectl" && -x "${BIN}/kubelet" ]] || die "run make build toolchain first"
  ls "${CP_IMAGES}"/*.tar >/dev/null 2>&1 || die "no control-plane images in ${CP_IMAGES}: run make images"
  ls "${ADDON_IMAGES}"/*.tar >/dev/null 2>&1 || die "no add-on images in ${ADDON_IMAGES}: run make images"
  command -v jq >/dev/null || ensure_apt jq
  # Before anything starts, so that a foreign apiserver, etcd or kubelet is
  # named instead of surfacing later as a crash-looping pod.
  check_ports

  start_containerd
  if have_images; then
    say "control-plane images already in containerd"
  else
    say "importing the control-plane and add-on images (${CP_IMAGES}, ${ADDON_IMAGES})"
    "${BIN}/bootlet" images import --address "${CTRD}" "${CP_IMAGES}" "${ADDON_IMAGES}" | sed "s/^/         /"
    have_images || die "control-plane or add-on images missing after the import"
  fi

  local addr
  addr="${UP_ADVERTISE_ADDRESS:-$(advertise_address)}"
  say "rendering assets into ${ASSETS} (node ${NODE}, advertise address ${addr}, etcd data ${ETCD_DATA})"
  "${BIN}/bootlet" render --asset-dir "${ASSETS}" --node-name "${NODE}" --advertise-address "${addr}" \
    --etcd-data-dir "${ETCD_DATA}" --kubelet-static-pod-path "${LIB}/manifests" \
    --kubelet-runtime-endpoint "unix://${RUN}/containerd.sock" --kubelet-pod-logs-dir "${LIB}/logs" \
    --pod-cidr "${POD_CIDR}" --service-cidr "${SERVICE_CIDR}" \
    --cni-bin-dir "${CNI_DIR}/bin" --cni-conf-dir "${CNI_DIR}/net.d" --cni-data-dir "${CNI_DIR}" \
    --flannel-run-dir "${RUN}/flannel" >/dev/null

  # bootlet creates the bootstrap pods from --manifests-dir (render's
  # bootstrap-manifests) at its start.
  local t_bootlet
  t_bootlet=$(date +%s.%N)
  start_bootlet
  wait_for "the bootstrap control plane" status_line "*readyz: ok*controller-manager held, scheduler held*"
  local t_readyz t_adopted t_selfhosted t_addons
  t_readyz=$(date +%s.%N)

  # The kubelet comes once the bootstrap control plane serves, as in the
  # lifecycle test: it registers the node at once and adopts bootlet's pods.
  start_kubelet
  if [[ -f "${PIVOT_DONE}" ]]; then
    say "the pivot is already done (${PIVOT_DONE}): nothing left to adopt"
  else
    wait_for "the adoption by the kubelet" adoption_line "*| adopted"
    # The kubelet takes the running containers over: none is restarted.
    say "container restarts of the adopted pods: $("${BIN}/bootlet" get pods -n kube-system -o json |
      jq '[.items[].status.containerStatuses[]?.restartCount] | add // 0')"
  fi
  t_adopted=$(date +%s.%N)
  wait_for "the pivot to self-hosted" selfhosted_line "*| self-hosted"
  t_selfhosted=$(date +%s.%N)
  wait_for "the add-ons (pod network, kube-proxy, CoreDNS)" addons_line "*| add-ons ready"
  t_addons=$(date +%s.%N)

  install -m 0600 "${ASSETS}/admin.conf" "${KUBECONFIG_OUT}"
  say "control plane self-hosted"
  echo
  "${BIN}/bootlet" get pods -n kube-system -o wide
  echo
  kubectl_admin get pods -n kube-system -o wide --field-selector "spec.nodeName=${NODE}" || true
  echo
  "${BIN}/bootlet" checkpoint ls --root-dir "${LIB}/bootlet" | grep -i -e '^KIND' -e podcheckpoint || true
  cat <<EOM

make up took $(secs "${START}") s: apiserver /readyz and leases at $(secs "${START}" "${t_readyz}") s ($(secs "${t_bootlet}" "${t_readyz}") s after bootlet's start), kubelet adoption at $(secs "${START}" "${t_adopted}") s, self-hosted at $(secs "${START}" "${t_selfhosted}") s, add-ons Ready at $(secs "${START}" "${t_addons}") s.
(Times of this run: a step already done before it is not timed again.)

The control plane is self-hosted: the kubelet runs kube-apiserver (DaemonSet),
kube-controller-manager and kube-scheduler (Deployments) and etcd (static pod);
bootlet is the checkpointer of the apiserver. The add-ons run too: flannel
(pod network ${POD_CIDR}), kube-proxy (Services ${SERVICE_CIDR}) and CoreDNS
(kube-dns). Use it with:
  export KUBECONFIG=${KUBECONFIG_OUT}
  ${BIN}/kubectl get nodes
  ${BIN}/kubectl get pods -A -o wide
  ${BIN}/kubectl -n kube-system get ds,deploy
bootlet's own view (its pods with their OWNER, its checkpoints):
  export BOOTLET_SERVER=${BOOTLET_SERVER}
  ${BIN}/bootlet get pods -A -o wide
  ${BIN}/bootlet checkpoint ls --root-dir ${LIB}/bootlet
Assets (PKI, kubeconfigs, manifests): ${ASSETS}
Logs: ${LIB}/bootlet.log, ${LIB}/kubelet.log, ${LIB}/containerd.log, pods in ${LIB}/logs
Power-cycle the node: make reboot    Stop everything and remove all state: make down
EOM
}

# readyz_line: the apiserver's /readyz, and what bootlet runs, after a reboot.
readyz_line() {
  local readyz pods
  readyz="$(kubectl_admin get --raw /readyz 2>/dev/null | head -c 20)" || true
  pods="$(bootlet_pods | awk '{ sub(/^kube-/, "", $1); printf "%s %s %s  ", $1, $3, $2 }')"
  echo "bootlet pods: ${pods:-none yet}| apiserver readyz: ${readyz:-no answer}"
}

cmd_reboot() {
  [[ -d "${LIB}/bootlet" && -f "${ASSETS}/admin.conf" ]] || die "nothing to reboot in ${LIB}: run make up first"
  command -v jq >/dev/null || ensure_apt jq
  say "power off: SIGKILL to the kubelet, bootlet and containerd, every container process killed"
  "${HACK}/kubelet-up.sh" kill "${LIB}" "${RUN}" | sed "s/^/[$(since)] /"
  "${HACK}/bootlet-up.sh" kill "${LIB}" "${RUN}" | sed "s/^/[$(since)] /"
  local pid
  if [[ -f "${CTRD}.pid" ]]; then
    pid="$(cat "${CTRD}.pid")"
    if tr '\0' ' ' < "/proc/${pid}/cmdline" 2>/dev/null | grep -qF -- "--config ${CTRD}.toml"; then
      kill -9 "${pid}" 2>/dev/null || true
      wait_gone "${pid}" 150 || die "containerd (pid ${pid}) did not exit"
    fi
  fi
  # Kills every shim and container process of our containerd, unmounts the
  # rootfs and netns mounts, drops the pods' iptables rules, the pod
  # network's devices and kube-proxy's and flannel's rules (as
  # e2e/reboot.go's SimulateReboot); keeps containerd's root.
  "${HACK}/containerd.sh" down --address "${CTRD}" --root "${LIB}/containerd" --state "${RUN}/containerd" | sed "s/^/[$(since)] /"
  local pids
  pids="$(leftovers | tr '\n' ' ')"
  [[ -z "${pids// /}" ]] || die "processes left after the power-off: ${pids}"
  say "no process of the node left"
  # No mount survives a reboot (the kubelet's tmpfs volumes under
  # LIBDIR/kubelet, anything under RUNDIR); /run is a tmpfs on a real node:
  # RUNDIR goes with containerd's state, the sockets and pidfiles.
  unmount_all
  [[ -z "$(mounts_under)" ]] || die "mounts left after the power-off: $(mounts_under | tr '\n' ' ')"
  # The pod bridge goes with the power (containerd.sh names it in SOCK.env).
  local bridge
  bridge="$(sed -n 's/^BRIDGE=//p' "${CTRD}.env" 2>/dev/null)"
  rm -rf "${RUN}"
  [[ -z "${bridge}" ]] || ip link delete "${bridge}" 2>/dev/null || true
  say "powered off: ${RUN} wiped, ${LIB} kept, pod network devices and add-on iptables rules gone"

  local t_on t_readyz t_selfhosted t_addons
  t_on=$(date +%s.%N)
  # Condition times have whole seconds.
  READY_SINCE="${t_on%.*}"
  say "power on: containerd, bootlet, the kubelet"
  check_ports
  start_containerd
  start_bootlet
  start_kubelet
  wait_for "the apiserver after the reboot" readyz_line "*readyz: ok"
  t_readyz=$(date +%s.%N)
  say "apiserver /readyz $(secs "${t_on}" "${t_readyz}") s after the power-on"
  # The add-ons need an apiserver, not a self-hosted one: they come back
  # while the checkpoint still serves.
  wait_for "the add-ons after the reboot" addons_line "*| add-ons ready"
  t_addons=$(date +%s.%N)
  say "add-ons Ready again: pod network, Services and DNS"
  wait_for "the self-hosted control plane after the reboot" selfhosted_line "*| self-hosted"
  t_selfhosted=$(date +%s.%N)
  say "control plane self-hosted again, checkpoint withdrawn"
  echo
  "${BIN}/bootlet" get pods -n kube-system -o wide
  echo
  kubectl_admin get pods -n kube-system -o wide --field-selector "spec.nodeName=${NODE}" || true
  cat <<EOM

make reboot: power-on -> apiserver /readyz $(secs "${t_on}" "${t_readyz}") s, -> add-ons Ready (Services and DNS) $(secs "${t_on}" "${t_addons}") s, -> self-hosted again (checkpoint withdrawn) $(secs "${t_on}" "${t_selfhosted}") s; $(secs "${START}") s in all.
  export KUBECONFIG=${KUBECONFIG_OUT}
  ${BIN}/kubectl get pods -A -o wide
EOM
}

unmount_all() {
  local m
  mounts_under | sort -r | while read -r m; do
    m="$(printf '%b' "${m}")"
    umount "${m}" 2>/dev/null || umount -l "${m}" 2>/dev/null || true
  done
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
  # The kubelet first (its pods keep running until containerd goes), as a
  # node shuts its units down in the reverse of their boot order.
  "${HACK}/kubelet-up.sh" stop "${LIB}" "${RUN}"
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
  unmount_all
  rm -rf "${LIB}" "${RUN}"
  pids="$(leftovers | tr '\n' ' ')"
  [[ -z "${pids// /}" ]] || die "processes left after make down: ${pids}"
  [[ -z "$(mounts_under)" ]] || die "mounts left after make down: $(mounts_under | tr '\n' ' ')"
  [[ ! -e "${LIB}" && ! -e "${RUN}" ]] || die "state left after make down"
  echo "down: no process, mount or state left under ${LIB} or ${RUN}"
}

case "${CMD}" in
  up) cmd_up ;;
  reboot) cmd_reboot ;;
  down) cmd_down ;;
  *) usage >&2; exit 2 ;;
esac
