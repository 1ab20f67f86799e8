#!/usr/bin/env bash
# The fast gate: everything that needs neither root nor a runtime, in a
# few minutes. The tree is formatted, vetted, staticcheck- and
# sloglint-clean on each build it has (Linux, the kube tag, the client off
# Linux), and every test that needs no tier passes: the unit tests, the
# archtests, the golden files of what each runtime asks for, the list of
# what the binary links. scripts/test.sh (CI) runs it first, so a
# formatting or unit failure fails in minutes. Usage: scripts/check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
step() { echo "check: $* ($((SECONDS - t0)) s)"; }

# Everything is built once, with the race detector where cgo can build
# (as scripts/test.sh's run is): vet, staticcheck and the tests share those
# builds, and so does scripts/test.sh after.
# (-race is passed to each command, not exported in GOFLAGS: the tests'
# own go commands build the shipped binary without cgo.)
race=()
if [ "$(go env CGO_ENABLED)" = 1 ] && command -v "$(go env CC)" >/dev/null; then
  export CGO_ENABLED=1
  race=(-race)
fi

step gofmt
unformatted=$(gofmt -l .)
[ -z "$unformatted" ] || { echo "scripts/check.sh: gofmt -l lists files to format:" >&2; echo "$unformatted" >&2; exit 1; }

step go vet
go vet "${race[@]}" ./...
go vet "${race[@]}" -tags kube ./internal/cli ./cmd/corral

# staticcheck.conf turns on every check; go.mod pins the tool. Built for
# this machine once: `go tool` would build it for GOOS.
step staticcheck
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
go build -o "$tools/staticcheck" honnef.co/go/tools/cmd/staticcheck
go build -o "$tools/sloglint" go-simpler.org/sloglint/cmd/sloglint
GOFLAGS="${race[*]}" "$tools/staticcheck" ./...
GOFLAGS="${race[*]}" "$tools/staticcheck" -tags kube ./internal/cli ./cmd/corral
# Off Linux corral is the client (the CLI, corral mcp, corral agent): it
# must build and be clean there (without cgo, so without the race detector).
CGO_ENABLED=0 GOOS=darwin "$tools/staticcheck" -tests=false ./cmd/corral ./internal/cli/...
CGO_ENABLED=0 GOOS=windows "$tools/staticcheck" -tests=false ./cmd/corral ./internal/cli/...
CGO_ENABLED=0 GOOS=darwin GOARCH=arm64 go build -o /dev/null ./cmd/corral
CGO_ENABLED=0 GOOS=windows GOARCH=amd64 go build -o /dev/null ./cmd/corral

# Structured logging: a constant message, snake_case keys given once
# (logctx adds request_id and sandbox_id from the context), the Context
# form wherever a context is at hand, never the key "sandbox".
step sloglint
sloglint=("$tools/sloglint" -no-mixed-args -static-msg -key-naming-case snake -ctx-only scope -forbidden-keys sandbox)
GOFLAGS="${race[*]}" "${sloglint[@]}" ./...
GOFLAGS="${race[*]} -tags=kube" "${sloglint[@]}" ./internal/cli ./cmd/corral

# The tests that need no tier: with no CORRAL_TEST_* variable set, the
# root, Docker and Kubernetes tiers skip (CI runs them after, in
# scripts/test.sh, where a skip of a required test fails).
step go test
env -u CORRAL_TEST_ROOT -u CORRAL_TEST_DOCKER -u CORRAL_TEST_KUBE \
  go test "${race[@]}" -json -timeout 60m ./... | go run ./hack/tiercheck
step "passed"
