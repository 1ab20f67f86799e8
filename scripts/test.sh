#!/usr/bin/env bash
# Runs every test tier of corral on a Debian machine as root: first the
# fast gate (scripts/check.sh), then installs what the tiers need, opts
# them in, and fails if a required integration test was skipped. Starts a
# dockerd of its own for the Docker tier (and stops it at the end).
# Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: run as root (the integration tiers drive runc, namespaces and cgroups)" >&2
  exit 1
fi

# The fast gate first (no root, a few minutes): a formatting, lint or
# unit failure fails here, before anything is installed or built.
scripts/check.sh

need=()
command -v wrk >/dev/null || need+=(wrk)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v unshare >/dev/null || need+=(util-linux)
command -v npm >/dev/null || need+=(nodejs npm)
command -v dockerd >/dev/null || need+=(docker.io)
command -v curl >/dev/null || need+=(curl)
command -v ip >/dev/null || need+=(iproute2)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v openssl >/dev/null || need+=(openssl)
command -v iptables >/dev/null || need+=(iptables)
# Real Jupyter kernels for the code interpreter's tests (Debian's, run by
# /usr/bin/python3 whatever python3 is first on PATH).
[ -e /usr/share/jupyter/kernels/python3/kernel.json ] || need+=(python3-ipykernel python3-jupyter-client)
/usr/bin/python3 -c 'import matplotlib, numpy, pandas' 2>/dev/null || need+=(python3-matplotlib python3-numpy python3-pandas)
command -v debootstrap >/dev/null || need+=(debootstrap)
# The web console's browser tests drive Debian's chromium (no download).
command -v chromium >/dev/null || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# What this script started is stopped on exit, in reverse order.
image_pid=
dockerd_pid=
kube_up=
bridge=corral-ci0
docker_run=/run/corral-ci-docker
cleanup() {
  if [ -n "$kube_up" ]; then scripts/k8s.sh down || true; fi
  if [ -n "$dockerd_pid" ]; then
    kill "$dockerd_pid" 2>/dev/null
    wait "$dockerd_pid" 2>/dev/null || true
    # What the engine left mounted in its exec root (its null-netns).
    awk -v d="$docker_run/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | xargs -r -n1 umount -l
  fi
  ip link del "$bridge" 2>/dev/null || true
  if [ -n "$image_pid" ]; then
    kill "$image_pid" 2>/dev/null
    wait "$image_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

# The code interpreter's image, from Debian packages (cached by a digest of
# its recipe: minutes the first time, nothing after), builds in the
# background while the runtimes and the cluster compile: it is mostly
# downloads and dpkg, they are mostly CPU.
image_out=$(mktemp)
image_err=$(mktemp)
images/code-interpreter/build.sh >"$image_out" 2>"$image_err" &
image_pid=$!

# The runc every tier runs: built at the release tools/runc pins
# (scripts/runtimes.sh, cached after the first build) and first on PATH,
# ahead of the older runc Debian's docker.io and containerd pull in. The
# corral servers the tests start, the dockerd started below (its runtime
# "runc" is the first on its PATH) and scripts/k8s.sh's containerd run it.
runc=$(scripts/runtimes.sh)
PATH=$(dirname "$runc"):$PATH
runc_version=$(cd tools/runc && go list -m -f '{{.Version}}' github.com/opencontainers/runc)
runc_says=$(runc --version)
runc_says=${runc_says%%$'\n'*}
if [ "$(command -v runc)" != "$runc" ] || [ "$runc_says" != "runc version ${runc_version#v}" ]; then
  echo "scripts/test.sh: runc on PATH is $(command -v runc) (\"$runc_says\"), not the pinned $runc (runc version ${runc_version#v})" >&2
  exit 1
fi

# gVisor's runsc, for the runsc tier on both runtimes: built at the commit
# tools/runsc pins (scripts/runtimes.sh runsc, cached after the first
# build; Debian's runsc package is a 2022 gVisor) and first on PATH, ahead
# of /usr/bin/runsc if Debian's is installed. The corral servers the tests
# start and the dockerd started below (daemon.json names it) run it.
runsc=$(scripts/runtimes.sh runsc)
PATH=$(dirname "$runsc"):$PATH
runsc_version=$(cd tools/runsc && go list -m -f '{{.Version}}' gvisor.dev/gvisor)
runsc_says=$(runsc --version)
runsc_says=${runsc_says%%$'\n'*}
if [ "$(command -v runsc)" != "$runsc" ] || [ "$runsc_says" != "runsc version $runsc_version" ]; then
  echo "scripts/test.sh: runsc on PATH is $(command -v runsc) (\"$runsc_says\"), not the pinned $runsc (runsc version $runsc_version)" >&2
  exit 1
fi


# The Docker tier runs on an engine this script starts and configures
# itself, whatever else runs on the machine: its own socket, exec root,
# data root (kept between runs: the images tests build stay cached) and
# bridge, with --live-restore as production should run it. Its
# daemon.json gives it the pinned gVisor as the runtime "runsc", with the
# arguments corral's runsc tier needs (docs/isolation.md): host
# networking, and no overlay of the root (gVisor's default since 2023
# would keep the sandbox's writes out of the container's writable layer,
# which snapshots commit). Every test reaches it through DOCKER_HOST.
docker_data=/var/lib/corral-ci-docker
mkdir -p "$docker_run" "$docker_data"
printf '{"runtimes": {"runsc": {"path": "%s", "runtimeArgs": ["--network=host", "--overlay2=none"]}}}\n' "$runsc" >"$docker_run/daemon.json"
# A bridge of its own, beside any docker0 another engine has.
ip link del "$bridge" 2>/dev/null || true
ip link add "$bridge" type bridge
ip addr add 10.254.173.1/24 dev "$bridge"
ip link set "$bridge" up
export DOCKER_HOST=unix://$docker_run/docker.sock
dockerd --host "$DOCKER_HOST" --exec-root "$docker_run/exec" --data-root "$docker_data" --pidfile "$docker_run/docker.pid" \
  --bridge "$bridge" --live-restore --config-file "$docker_run/daemon.json" >"$docker_run/dockerd.log" 2>&1 &
dockerd_pid=$!
for _ in $(seq 1 60); do
  curl -sf --unix-socket "$docker_run/docker.sock" http://docker/_ping >/dev/null 2>&1 && break
  kill -0 "$dockerd_pid" 2>/dev/null || { cat "$docker_run/dockerd.log" >&2; echo "scripts/test.sh: dockerd exited" >&2; exit 1; }
  sleep 1
done
curl -sf --unix-socket "$docker_run/docker.sock" http://docker/_ping >/dev/null || { cat "$docker_run/dockerd.log" >&2; echo "scripts/test.sh: dockerd did not answer in 60 s" >&2; exit 1; }
# The engine reports the runc it runs: the pinned one.
engine=$(curl -sf --unix-socket "$docker_run/docker.sock" http://docker/version)
[[ "${engine//[$' \n']/}" == *"{\"Name\":\"runc\",\"Version\":\"${runc_version#v}\""* ]] ||
  { echo "scripts/test.sh: dockerd does not run runc ${runc_version#v}: $engine" >&2; exit 1; }

# The Kubernetes tier needs a cluster: scripts/k8s.sh builds one from the
# Go module proxy (about 16 minutes the first time on 2 cores, cached
# after) and starts it; it is torn down on exit. Built before the tests
# compile, not beside them: two cores do not share well.
if [ "${CORRAL_TEST_KUBE_ENV:-}" = "" ]; then
  kube_up=1
  scripts/k8s.sh up
fi
set -a
. "${CORRAL_TEST_KUBE_ENV:-/var/lib/corral-k8s/env}"
set +a
export CORRAL_TEST_KUBE=1

# The code interpreter's image, started above.
wait "$image_pid" || { cat "$image_err" >&2; echo "scripts/test.sh: images/code-interpreter/build.sh failed" >&2; exit 1; }
image_pid=
CORRAL_TEST_CODE_IMAGE=$(cat "$image_out")
[ -s "$CORRAL_TEST_CODE_IMAGE" ] || { cat "$image_err" >&2; echo "scripts/test.sh: the code-interpreter build printed no image ($CORRAL_TEST_CODE_IMAGE)" >&2; exit 1; }
export CORRAL_TEST_CODE_IMAGE

# The web console's committed build (internal/console/dist, embedded so
# that go build needs no Node) is what web/ builds from its lock file.
scripts/web.sh >/dev/null
if [ -n "$(git status --porcelain -- internal/console/dist)" ]; then
  git status --short -- internal/console/dist >&2
  echo "scripts/test.sh: internal/console/dist is not what web/ builds: run scripts/web.sh and commit the result" >&2
  exit 1
fi

export CGO_ENABLED=1 # the race detector needs cgo; the shipped binary is built with CGO_ENABLED=0
export CORRAL_TEST_ROOT=1
export CORRAL_TEST_DOCKER=1

# Tests that must run and pass; a skip is a failure (hack/tiercheck/required.txt).
mapfile -t required < <(grep -v -e '^#' -e '^$' hack/tiercheck/required.txt)

# Every tier, with the race detector; the tier variables are set, so a
# required test that skips fails the run.
# -count=1: never a cached result. A package whose TestMain ends before
# m.Run without a tier variable (the SDK's, which needs a server) leaves Go
# no record of the variables it read, so its result from scripts/check.sh
# would be taken for this run's. The builds check.sh made are reused.
go test -race -count=1 -json -timeout 60m ./... | go run ./hack/tiercheck "${required[@]}"

# Every fuzz target, briefly (CORRAL_FUZZTIME each: 50000 inputs by default;
# a count, not a duration, because Go 1.26's coordinator can fail a target
# with "context deadline exceeded" at the end of a -fuzztime duration,
# golang/go#75804, fixed in 1.27 — seen here on sse.FuzzReader). A
# crash fails the run and leaves its input in the package's testdata/fuzz:
# commit it, and it is a regression case every `go test` then runs. The
# targets are pure; the tiers' variables would make some packages' TestMain
# start servers in every fuzz worker, so they are unset here.
fuzztime=${CORRAL_FUZZTIME:-50000x}
fuzzlog=$(mktemp)
grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sed 's|^\./||; s|/[^/]*_test\.go:func | |' | sort |
  while read -r pkg fn; do
    echo "fuzz: $pkg $fn ($fuzztime)"
    env -u CORRAL_TEST_ROOT -u CORRAL_TEST_DOCKER -u CORRAL_TEST_KUBE CGO_ENABLED=0 \
      go test -run '^$' -fuzz "^$fn\$" -fuzztime "$fuzztime" "./$pkg" >"$fuzzlog" 2>&1 ||
      { cat "$fuzzlog" >&2; echo "scripts/test.sh: $fn in ./$pkg failed" >&2; exit 1; }
  done
