# bootlet — see README.md. Everything built goes to _output/ (git-ignored).
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

OUT     := _output
BIN     := $(OUT)/bin
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)

# `make up` state: persistent under /var/lib, sockets under /run.
UP_LIB  := /var/lib/bootlet-up
UP_RUN  := /run/bootlet-up
UP_SOCK := $(UP_RUN)/bootlet.sock
UP_CTRD := $(UP_RUN)/containerd.sock

E2E_TIMEOUT ?= 75m

# `make cluster`: nodes in systemd-nspawn containers on a bridge (docs/cluster.md, "The harness").
MASTERS ?= 1
WORKERS ?= 1
NODE    ?=
# Extra flags of every node's bootlet daemon, e.g. --master-dead-after=2m.
BOOTLET_ARGS ?=
CLUSTER := $(GO) run ./e2e/cluster

# `make install`: where the node's files go (hack/install.sh, dist/systemd/README.md).
DESTDIR ?=
PREFIX  ?= /usr/local
UNITDIR ?=
IMAGES  ?=

# `make upgrade-images`: the version to build beside v1.36.3 (a row of hack/versions.sh).
TO      ?=

# RACE=1 builds the bootlet binary with the race detector (the e2e pass does).
RACE ?=
RACEFLAG := $(if $(filter 1,$(RACE)),-race,)
# Static, without cgo (as the kubelet is built), except with -race, which needs cgo: the
# daemon then maps no libc and its threads no pthread stacks (about 3 MiB of RSS).
BUILD_CGO := $(if $(filter 1,$(RACE)),1,0)

.PHONY: all deps build toolchain images upgrade-images upgrade test-upgrade unit e2e fuzz lint test bench up up-examples reboot down cluster cluster-down test-cluster test-conformance-cluster cluster-poweroff cluster-poweron cluster-reboot conformance install fmt vet docs clean

all: build

# bootlet is the lean binary (the daemon and every light verb); bootlet-tools adds the heavy
# verbs (describe, render, certs, etcd, recover, join), which bootlet execs
# (cmd/internal/cli/toolsexec.go): their libraries stay out of the daemon's memory
# (cmd/bootlet/deps_test.go holds that line).
build: ## the bootlet and bootlet-tools binaries (RACE=1: with -race)
	CGO_ENABLED=$(BUILD_CGO) $(GO) build $(RACEFLAG) -ldflags "-X main.version=$(VERSION)" -o $(BIN)/bootlet ./cmd/bootlet
	CGO_ENABLED=$(BUILD_CGO) $(GO) build $(RACEFLAG) -ldflags "-X main.version=$(VERSION)" -o $(BIN)/bootlet-tools ./cmd/bootlet-tools

deps: ## Debian packages (libseccomp-dev, busybox-static, iptables, nftables, conntrack, ...)
	hack/deps.sh

toolchain: deps ## containerd, runc, CNI plugins, kubelet, kubectl, control plane + etcd, add-ons (kube-proxy, flannel, flannel CNI, coredns) from pinned Go modules
	hack/toolchain.sh --control-plane --addons

images: deps toolchain ## OCI archives: pause, busybox, testserver; control plane in images/control-plane; kube-proxy, flannel, flannel-cni-plugin, coredns in images/addons
	hack/images.sh

# An upgrade's target version: its own modules, binaries and archives; v1.36.3's
# _output/bin and _output/images are not touched, nothing is imported.
upgrade-images: deps ## TO=v1.37.2: that version's kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, kubectl, kubelet, etcd and CoreDNS (kubeadm's pins) as OCI archives in _output/images/TO/, beside v1.36.3's; imports nothing
	hack/upgrade-images.sh "$(TO)"

# Not part of `test`: it needs the cluster of `make up` and takes hours on 2 cores.
# CONFORMANCE_VERSION (like CONFORMANCE_FOCUS, read by the script from the environment) picks
# another version's suite, for the node after `make upgrade TO=...` (hack/README.md).
conformance: deps ## upstream [Conformance] specs (e2e.test v1.36.3, ginkgo -p) against the `make up` cluster, offline; CONFORMANCE_FOCUS/CONFORMANCE_SKIP select a subset; results in _output/conformance; CONFORMANCE_VERSION=v1.37.2: that version's e2e.test and test images, built beside v1.36.3's, for the node after make upgrade TO=v1.37.2, results in _output/conformance/v1.37.2
	hack/conformance.sh

docs: ## docs/reference (the command line and the configuration file) regenerated from the code; docs/images/bench-*.svg from the newest docs/records/data/<date>/
	$(GO) run ./cmd/internal/gendocs -out docs/reference -config-types config/types.go
	$(GO) run ./hack/benchplot -data docs/records/data -out docs/images

fmt:
	gofmt -l $$(git ls-files '*.go') | (! grep .)

vet:
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...

unit: ## unit tests with the race detector (no runtime needed)
	$(GO) test -race ./...

lint: deps ## staticcheck (pinned, built into _output/bin) and shellcheck
	hack/lint.sh

# Budgets are counts of executions, not durations: with a duration, Go 1.26's fuzz coordinator
# can fail a run with a bare "context deadline exceeded" and no crasher when a worker is busy at
# the deadline (golang/go#75804, fixed in Go 1.27). Each takes about 10 s here.
fuzz: ## short fuzzing of decoding, validation and patching
	$(GO) test ./podapi/ -run '^$$' -fuzz FuzzDecodePod -fuzztime 3000x
	$(GO) test ./podapi/ -run '^$$' -fuzz FuzzPatch -fuzztime 3000x
	$(GO) test ./podapi/ -run '^$$' -fuzz FuzzDefaultPod -fuzztime 5000x

# The daemon under test is built with -race; a race report in its log, or in a cluster node's
# journal, fails the test. E2E_ELSEWHERE are the tests of `make test-cluster` and `make
# test-upgrade`: with them the suite took 65 of CI's 90 minutes on 2 CPUs before any build,
# and a slower machine ran out (docs/records/README.md, the CI budget's record).
E2E_ELSEWHERE := TestSystemdBoot|TestClusterHA|TestClusterGrownLifecycle|TestClusterGrownReplaceDead|TestClusterGrownReplaceFirst|TestClusterGrownConformance|TestClusterThreeMasters|TestUpgradeMinor|TestUpgradeKilled|TestUpgradeCluster|TestUpgradeTwoMasters|TestUpgradeGrown
# -p 1 streams each test's output as it runs (go test buffers a package's output when it
# tests several at once), so a run that CI stops at its limit still shows where it was; as -p
# also serialises compiling, the test binaries are compiled first, in parallel (-run '^$$').
e2e: toolchain images ## end-to-end tests against a private containerd and the real kubelet
	$(MAKE) build RACE=1
	$(GO) test -tags e2e ./e2e/... -count=1 -run '^$$'
	$(GO) test -p 1 -tags e2e ./e2e/... -count=1 -v -timeout $(E2E_TIMEOUT) -skip '^($(E2E_ELSEWHERE))$$'

# A real minor upgrade, v1.36.3 to v1.37.2, of the single master, then of three masters and a worker,
# of two masters and a worker, and of three masters grown by label, on `make cluster`'s nodes, etcd included (docs/operations.md, "Upgrades"). It needs v1.37.2's
# binaries and images, which take about 50 min to build cold on 2 CPUs: beyond CI's budget beside
# the rest, so it is not in make test. The cluster's test runs bootlet as it ships, without -race,
# as make test-cluster does (its clients count requests slower than 1 s on 2 CPUs).
test-upgrade: toolchain images ## TestUpgradeMinor, TestUpgradeKilled, TestUpgradeCluster, TestUpgradeTwoMasters and TestUpgradeGrown: v1.37.2 built (make upgrade-images), then a single master (also with bootlet and the whole node killed in the apiserver's and the kubelet's steps), three masters and a worker, two masters and a worker, and three masters grown by label from one with a worker (etcd included), upgraded to it by the upgrade controller (apply --wait) under the strict clients
	$(MAKE) upgrade-images TO=v1.37.2
	$(MAKE) build RACE=1
	$(GO) test -tags e2e ./e2e/ -run '^(TestUpgradeMinor|TestUpgradeKilled)$$' -count=1 -v -timeout 60m
	$(MAKE) build
	$(GO) test -tags e2e ./e2e/ -run '^(TestUpgradeCluster|TestUpgradeTwoMasters|TestUpgradeGrown)$$' -count=1 -v -timeout 140m

# Whole nodes booted under systemd in systemd-nspawn containers (docs/cluster.md); one cluster
# at a time. TestSystemdBoot (one node from the shipped units, rebooted) and TestClusterHA (three
# masters: the VIP's holder powered off, a dead master's member removed, the VIP's holder demoted
# by its label and promoted again) run with -race as make e2e does, about 15 min on 2 CPUs.
# TestClusterThreeMasters' bootlet is built as it ships, without -race: the test counts requests
# slower than 1 s on 2 CPUs shared by four nodes, and the race detector multiplied bootlet's CPU
# several times (60 s of the 194 s its rolling upgrade took). TestClusterJoinWorker, one master
# booted from the same units and a worker, stays in make e2e.
test-cluster: toolchain images ## TestSystemdBoot, TestClusterHA (three masters: power-off, a dead master, demotion and promotion by label), TestClusterGrownLifecycle (one master and two workers grown to three masters: the first one's power-off, every node rebooted, back to one master), TestClusterGrownReplaceDead (one master and three workers, two promoted: a promoted master dead for good, the third worker promoted in its place), TestClusterGrownReplaceFirst (the same with the first master dead: a promoted master leads) and TestClusterThreeMasters (three masters and a worker: workloads, a rolling upgrade, reboots)
	$(MAKE) build RACE=1
	$(GO) test -tags e2e ./e2e/ -run '^(TestSystemdBoot|TestClusterHA|TestClusterGrownLifecycle|TestClusterGrownReplaceDead|TestClusterGrownReplaceFirst)$$' -count=1 -v -timeout 95m
	$(MAKE) build
	$(GO) test -tags e2e ./e2e/ -run '^TestClusterThreeMasters$$' -count=1 -v -timeout 60m

# The upstream conformance suite against a cluster grown by label to three masters and a worker
# (TestClusterGrownConformance): the suite's run alone is longer than make test-cluster, so it has
# its own target. bootlet as it ships, without -race: the suite's load is the test.
test-conformance-cluster: toolchain images ## TestClusterGrownConformance: one master and three workers, two promoted by label, then make conformance's selection with the two-node spec kept in against the three masters and the worker; at least 99% pass; results in _output/conformance/grown-cluster
	hack/toolchain.sh --conformance
	hack/images.sh conformance
	$(MAKE) build
	$(GO) test -tags e2e ./e2e/ -run '^TestClusterGrownConformance$$' -count=1 -v -timeout 180m

test: fmt vet lint unit fuzz e2e ## what CI runs

# The data goes to the repository, one directory per campaign's day, which the record of the
# campaign reads and `make docs` plots (docs/records/README.md); _output/bench keeps a copy and the logs.
BENCH_DATA ?= docs/records/data/$(shell date -u +%Y-%m-%d)

bench: toolchain images build ## pods.json, recovery.json, footprint.json, bootstrap.json (control plane: bootlet vs kubelet vs floor), handoff.json (adoption, pivot, reboot with the real kubelet) into BENCH_DATA (docs/records/data/<today>) and _output/bench
	$(GO) run -tags e2e ./e2e/bench -data $(BENCH_DATA)

up: toolchain images build ## a single-node control plane, first boot to self-hosted: bootlet, the kubelet, the pivot (hack/up.sh); kubeconfig in /var/lib/bootlet-up
	hack/up.sh up $(UP_LIB) $(UP_RUN)

up-examples: ## apply manifests/examples/ to the bootlet of `make up`
	BOOTLET_SERVER=unix://$(UP_SOCK) $(BIN)/bootlet apply -f manifests/examples/
	hack/bootlet-up.sh report $(UP_LIB) $(UP_RUN)

# `make up`'s node to TO through its own API: the target's archives (built once), imported
# into the node's containerd (an image already there keeps its digest), then the upgrade
# controller's steps, followed to the end. etcd stays (docs/operations.md, "Upgrades").
upgrade: toolchain build ## TO=v1.37.2: upgrade `make up`'s node: make upgrade-images, import them into its containerd, bootlet upgrade apply --wait
	@test -n "$(TO)" || { echo "make upgrade needs TO, e.g. make upgrade TO=v1.37.2" >&2; exit 2; }
	$(MAKE) upgrade-images TO=$(TO)
	$(BIN)/bootlet images import --address unix://$(UP_RUN)/containerd.sock $(OUT)/images/$(TO)/
	@echo "waiting (at most 3 minutes) for the kubelet to report the imported images in its node's status"
	@for i in $$(seq 1 36); do $(BIN)/bootlet upgrade plan --to $(TO) --kubeconfig $(UP_LIB)/assets/admin.conf >/dev/null 2>&1 && break; sleep 5; done
	$(BIN)/bootlet upgrade apply --to $(TO) --wait --kubeconfig $(UP_LIB)/assets/admin.conf

reboot: ## power-cycle the `make up` node: SIGKILL everything, wipe /run/bootlet-up, start containerd, bootlet, the kubelet; wait until self-hosted again
	hack/up.sh reboot $(UP_LIB) $(UP_RUN)

down: ## stop everything `make up` started (the kubelet too), unmount, remove its state; fails if anything is left
	hack/up.sh down $(UP_LIB) $(UP_RUN)

# The nodes are Debian root file systems with `make install PREFIX=/usr IMAGES=1` (what is
# built: run `make toolchain images` first), each booted by systemd-nspawn with its own network
# namespace on the bridge bl-cluster0 (172.30.90.0/24); they keep running when make returns.
cluster: build ## MASTERS=m WORKERS=n nodes on this machine, each its own systemd-nspawn; masters rendered once, bootstrap together to self-hosted behind the VIP 172.30.90.10 (keepalived), workers join through it (bootlet join); state in /var/lib/bootlet-cluster; prints the kubeconfig
	$(CLUSTER) up --repo $(CURDIR) --masters $(MASTERS) --workers $(WORKERS) --bootlet-args "$(BOOTLET_ARGS)"

cluster-down: ## remove the cluster: no process, mount, netns, cgroup, veth, bridge, iptables rule or state left (fails if anything is)
	$(CLUSTER) down

cluster-poweroff: ## NODE=x: SIGKILL every process of the node, wipe its runtime state (/run, cgroups, network); its disk stays
	$(CLUSTER) poweroff $(NODE)

cluster-poweron: ## NODE=x: boot the node again on its disk
	$(CLUSTER) poweron $(NODE)

cluster-reboot: ## NODE=x|all: poweroff, then poweron
	$(CLUSTER) reboot $(NODE)

# Installs what is built, builds nothing (run `make toolchain build` first, as
# yourself, then install as root): no build runs as root in the tree.
install: ## binaries, systemd units (bootlet-containerd, bootlet, bootlet-kubelet) and default config for a node; DESTDIR, PREFIX (/usr/local), UNITDIR, IMAGES=1 (also the image archives); starts nothing
	hack/install.sh --out "$(OUT)" --destdir "$(DESTDIR)" --prefix "$(PREFIX)" $(if $(UNITDIR),--unitdir "$(UNITDIR)") $(if $(filter 1,$(IMAGES)),--images)

clean:
	rm -rf $(OUT)
