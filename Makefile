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

.PHONY: all deps build toolchain images unit e2e fuzz test bench up down fmt vet clean

all: build

build: ## the bootlet binary
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/bootlet ./cmd/bootlet

deps: ## Debian packages (libseccomp-dev, busybox-static, iptables, ...)
	hack/deps.sh

toolchain: deps ## containerd, runc, CNI plugins, kubelet, kubectl from pinned Go modules
	hack/toolchain.sh

images: deps ## OCI archives: pause, busybox, testserver
	hack/images.sh

fmt:
	gofmt -l $$(git ls-files '*.go') | (! grep .)

vet:
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...

unit: ## unit tests (no runtime needed)
	$(GO) test ./...

fuzz: ## short fuzzing of decoding, validation and patching
	$(GO) test ./podapi/ -run '^$$' -fuzz FuzzDecodePod -fuzztime 10s
	$(GO) test ./podapi/ -run '^$$' -fuzz FuzzPatch -fuzztime 10s
	$(GO) test ./podapi/ -run '^$$' -fuzz FuzzDefaultPod -fuzztime 10s

e2e: toolchain images build ## end-to-end tests against a private containerd and the real kubelet
	$(GO) test -tags e2e ./e2e/... -count=1 -v -timeout $(E2E_TIMEOUT)

test: fmt vet unit fuzz e2e ## what CI runs

bench: toolchain images build ## pod start latency: bootlet vs kubelet vs raw CRI
	$(GO) run -tags e2e ./e2e/bench

up: toolchain images build ## start a private containerd + bootlet daemon as a node would
	mkdir -p $(UP_LIB) $(UP_RUN)
	hack/containerd.sh up --root $(UP_LIB)/containerd --state $(UP_RUN)/containerd --address $(UP_CTRD) --log $(UP_LIB)/containerd.log
	hack/bootlet-up.sh start $(UP_LIB) $(UP_RUN)
	BOOTLET_SERVER=unix://$(UP_SOCK) $(BIN)/bootlet apply -f manifests/examples/
	hack/bootlet-up.sh report $(UP_LIB) $(UP_RUN)

down: ## stop what `make up` started and remove its state
	-hack/bootlet-up.sh stop $(UP_LIB) $(UP_RUN)
	hack/containerd.sh down --address $(UP_CTRD) --root $(UP_LIB)/containerd --state $(UP_RUN)/containerd --purge
	rm -rf $(UP_LIB) $(UP_RUN)

clean:
	rm -rf $(OUT)
