#!/usr/bin/env bash
# Static checks beyond gofmt and go vet (`make lint`, part of `make test`):
#   staticcheck (honnef.co/go/tools, pinned in hack/tools/staticcheck, built
#   into _output/bin by `hack/toolchain.sh --lint`) on the main module, on the
#   e2e build tag, and on the small modules under hack/;
#   and Debian's shellcheck on every shell script in the repository.
#
#   hack/lint.sh
# Exits non-zero on any finding.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_apt shellcheck
"${HACK}/toolchain.sh" --lint >/dev/null
cd "${REPO_ROOT}"

fail=0
step() { # NAME CMD...: runs CMD, remembers a failure, keeps going
  local name="$1"; shift
  if "$@"; then log "${name}: ok"; else log "${name}: FAILED"; fail=1; fi
}

step "staticcheck ./..." "${BIN}/staticcheck" ./...
step "staticcheck -tags e2e ./e2e/..." "${BIN}/staticcheck" -tags e2e ./e2e/...
for mod in hack/images/testserver hack/ocibuild hack/junitsum hack/tools/etcd hack/tools/flannel/tencentvpc-stub; do
  step "staticcheck ${mod}" env -C "${mod}" GOWORK=off "${BIN}/staticcheck" ./...
done
mapfile -t scripts < <(git ls-files '*.sh' .ci/run)
step "shellcheck (${#scripts[@]} scripts)" shellcheck -x "${scripts[@]}"
exit "${fail}"
