#!/usr/bin/env bash
# Installs the OCI runtimes corral's native runtime runs: runc, built from
# the Go module proxy at the release tools/runc/go.mod pins (Debian 12's
# own runc, 1.1.5, is open to the container escapes docs/runtime-oci.md
# lists), and gVisor's runsc for the runsc tier, built from the module
# proxy at the commit tools/runsc/go.mod pins (Debian 12's runsc is a 2022
# gVisor). scripts/start.sh and scripts/test.sh call it; so does
# scripts/k8s.sh for its containerd.
#
#   scripts/runtimes.sh         build (or take from the cache) runc, check that it
#                               runs a container on this machine, install it as
#                               $CORRAL_RUNC_BIN (/usr/local/sbin/runc, before
#                               Debian's /usr/sbin/runc on PATH) and print that path
#   scripts/runtimes.sh runsc   the same for runsc: install it as $CORRAL_RUNSC_BIN
#                               (/usr/local/sbin/runsc, before Debian's /usr/bin/runsc)
#
# runc needs cgo (its nsenter is C) and is built with seccomp against
# Debian's libseccomp-dev, as upstream's Makefile does; corral itself stays
# CGO_ENABLED=0. runsc is pure Go (CGO_ENABLED=0), built from gVisor's Go
# branch as published on the proxy (gVisor has no tagged Go releases there:
# a pseudo-version pins a commit). Each binary is cached under
# $CORRAL_RUNTIMES_CACHE keyed on the release, the build flags, its tools/
# module's go.mod and go.sum, and the Go (and for runc the C compiler and
# libseccomp) versions; the builds are reproducible, so a hit equals a
# rebuild. Everything but the path goes to stderr. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."

cache_root=${CORRAL_RUNTIMES_CACHE:-/var/cache/corral/runtimes}
what=${1:-runc}
case $what in
runc) dest=${CORRAL_RUNC_BIN:-/usr/local/sbin/runc} ;;
runsc) dest=${CORRAL_RUNSC_BIN:-/usr/local/sbin/runsc} ;;
*)
  echo "usage: scripts/runtimes.sh [runc|runsc]" >&2
  exit 2
  ;;
esac
tags="seccomp urfave_cli_no_docs"

log() { echo "runtimes.sh: $*" >&2; }
die() {
  log "$*"
  exit 1
}

[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages and $dest, and runs a container)"

if [ "$what" = runc ]; then
  # The release pinned: tools/runc/go.mod's, e.g. v1.5.3.
  version=$(cd tools/runc && go list -m -f '{{.Version}}' github.com/opencontainers/runc)
  # runc prints main.gitCommit as its "commit:" line. The module proxy
  # serves the release's tree without its git hash, so it is the tag.
  ldflags="-s -w -X main.gitCommit=$version"
else
  # The commit pinned: tools/runsc/go.mod's pseudo-version of gVisor's Go
  # branch, e.g. v0.0.0-20260905035102-160fafc42237.
  version=$(cd tools/runsc && go list -m -f '{{.Version}}' gvisor.dev/gvisor)
  # runsc prints runsc/version.version ("runsc version ..."); unset, it is
  # VERSION_MISSING. It is the pseudo-version, which names the commit and
  # its date (internal/runscversion reads it) and is not a release's name
  # ("release-YYYYMMDD.N"), which gVisor treats as an official build.
  ldflags="-s -w -X gvisor.dev/gvisor/runsc/version.version=$version"
fi

runc_deps() {
  local need=()
  command -v pkg-config >/dev/null || need+=(pkg-config)
  pkg-config --exists libseccomp 2>/dev/null || need+=(libseccomp-dev)
  command -v "$(go env CC)" >/dev/null || need+=(gcc)
  [ -e /usr/include/stdio.h ] || need+=(libc6-dev)
  if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]} (to build runc with cgo and seccomp)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${need[@]}" >/dev/null
  fi
}

runc_key() {
  { echo "$version $tags $ldflags pie"; go version; "$(go env CC)" --version | sed -n 1p; pkg-config --modversion libseccomp
    cat tools/runc/go.mod tools/runc/go.sum; } |
    sha256sum | cut -c1-16
}

runsc_deps() { :; } # pure Go: nothing but the Go toolchain

runsc_key() {
  { echo "$version $ldflags CGO_ENABLED=0"; go version; cat tools/runsc/go.mod tools/runsc/go.sum; } |
    sha256sum | cut -c1-16
}

# compile DIR: builds $what into DIR.
runc_compile() {
  (cd tools/runc && CGO_ENABLED=1 go build -mod=readonly -trimpath -buildmode=pie -tags "$tags" \
    -ldflags "$ldflags" -o "$1/runc" github.com/opencontainers/runc)
}
runsc_compile() {
  # gVisor is big (about 2.5 min on 2 cores busy with other builds): nice,
  # as the machine is shared.
  (cd tools/runsc && CGO_ENABLED=0 nice -n 10 go build -mod=readonly -trimpath \
    -ldflags "$ldflags" -o "$1/runsc" gvisor.dev/gvisor/runsc)
}

# build: prints the path of the cached binary, building it on a miss.
build() {
  local key dir
  key=$("${what}_key")
  dir="$cache_root/$what-${version#v}-$key"
  if [ -x "$dir/$what" ]; then
    echo "$dir/$what"
    return
  fi
  local tmp="$dir.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  local start=$SECONDS
  log "building $what $version into $dir (cold: about $([ "$what" = runc ] && echo a minute || echo 2.5 minutes) on 2 cores)"
  if ! "${what}_compile" "$tmp"; then
    rm -rf "$tmp"
    die "building $what $version failed"
  fi
  rm -rf "$dir"
  mv "$tmp" "$dir"
  log "built in $((SECONDS - start)) s"
  echo "$dir/$what"
}

# check_dir makes and prints a temporary directory for a check: bundle/
# with an empty root whose /bin and /lib are links into the host's /usr
# (which the check's config binds in), as on a merged-/usr Debian, and
# state/ for the runtime.
check_dir() {
  local t l
  t=$(mktemp -d)
  mkdir -p "$t/bundle/rootfs" "$t/state"
  for l in bin lib lib64 sbin; do
    if [ -d "/usr/$l" ]; then ln -s "usr/$l" "$t/bundle/rootfs/$l"; fi
  done
  echo "$t"
}

# check runc: fails unless runc reports the pinned release with seccomp and
# runs a container here: this machine's cgroup layout (limits on memory,
# pids and cpu), every namespace corral uses but the user namespace, a
# read-only root with /usr bound in, runc's default devices, masked and
# read-only paths, and a seccomp filter (which the process reports).
runc_check() {
  local runc=$1 out
  out=$("$runc" --version) || die "$runc --version failed"
  [ "${out%%$'\n'*}" = "runc version ${version#v}" ] ||
    die "$runc --version says \"${out%%$'\n'*}\", not runc version ${version#v}"
  out=$("$runc" features) || die "$runc features failed"
  [[ "${out//[$' \n\t']/}" == *'"seccomp":{"enabled":true'* ]] ||
    die "$runc was built without seccomp (runc features: $out)"

  local t id=corral-runtimes-check-$$
  t=$(check_dir)
  cat >"$t/bundle/config.json" <<EOF
{
  "ociVersion": "1.2.0",
  "process": {
    "terminal": false,
    "user": {"uid": 0, "gid": 0},
    "args": ["/usr/bin/grep", "^Seccomp:", "/proc/self/status"],
    "env": ["PATH=/usr/bin"],
    "cwd": "/",
    "capabilities": {"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"], "permitted": ["CAP_KILL"]},
    "noNewPrivileges": true
  },
  "root": {"path": "rootfs", "readonly": true},
  "hostname": "corral-runtimes-check",
  "mounts": [
    {"destination": "/proc", "type": "proc", "source": "proc"},
    {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=1m"]},
    {"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro", "nosuid", "nodev"]}
  ],
  "linux": {
    "cgroupsPath": "/$id",
    "resources": {
      "devices": [{"allow": false, "access": "rwm"}],
      "memory": {"limit": 67108864},
      "pids": {"limit": 64},
      "cpu": {"quota": 50000, "period": 100000}
    },
    "namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "cgroup"}],
    "maskedPaths": ["/proc/kcore", "/proc/keys", "/sys/firmware"],
    "readonlyPaths": ["/proc/sys", "/proc/sysrq-trigger"],
    "seccomp": {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["sethostname"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}
  }
}
EOF
  local rc=0
  out=$(timeout 60 "$runc" --root "$t/state" --rootless false run --bundle "$t/bundle" "$id" 2>&1 </dev/null) || rc=$?
  "$runc" --root "$t/state" delete --force "$id" >/dev/null 2>&1 || true
  rm -rf "$t"
  if [ "$rc" -ne 0 ] || ! grep -qE '^Seccomp:[[:space:]]+2$' <<<"$out"; then
    die "the runc built from tools/runc ($runc, $version) cannot run a container on this machine (exit $rc): $out"
  fi
}

# check runsc: fails unless runsc reports the pinned commit and runs a
# sandbox here as corral's runsc tier runs one (runscArgs in
# internal/driver/oci/runsc.go: host networking, no overlay of the root,
# a network namespace of its own for the gofer):
# this machine's cgroup layout (limits on memory, pids and cpu), the
# namespaces corral uses, gVisor's default platform (systrap), /usr bound
# in read-only, and a write to the root that lands in the host directory
# (gVisor's default since 2023, --overlay2=root:self, would keep it in a
# file store of the sandbox's: corral's exit file, snapshots and forks read
# the host directory). The process reports gVisor's kernel.
runsc_check() {
  local runsc=$1 out
  out=$("$runsc" --version) || die "$runsc --version failed"
  [ "${out%%$'\n'*}" = "runsc version $version" ] ||
    die "$runsc --version says \"${out%%$'\n'*}\", not runsc version $version"

  local t id=corral-runtimes-check-$$
  t=$(check_dir)
  cat >"$t/bundle/config.json" <<EOF
{
  "ociVersion": "1.0.2",
  "process": {
    "terminal": false,
    "user": {"uid": 0, "gid": 0},
    "args": ["/usr/bin/sh", "-c", "echo corral >/corral-check && /usr/bin/dmesg"],
    "env": ["PATH=/usr/bin"],
    "cwd": "/",
    "capabilities": {"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"], "permitted": ["CAP_KILL"]},
    "noNewPrivileges": true
  },
  "root": {"path": "rootfs", "readonly": false},
  "hostname": "corral-runtimes-check",
  "mounts": [
    {"destination": "/proc", "type": "proc", "source": "proc"},
    {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=1m"]},
    {"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro", "nosuid", "nodev"]}
  ],
  "linux": {
    "cgroupsPath": "/$id",
    "resources": {
      "memory": {"limit": 268435456},
      "pids": {"limit": 512},
      "cpu": {"quota": 50000, "period": 100000}
    },
    "namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}]
  }
}
EOF
  local rc=0 wrote
  out=$(timeout 60 "$runsc" --root "$t/state" --network=host --overlay2=none --gofer-network-namespace=new \
    run --bundle "$t/bundle" "$id" 2>&1 </dev/null) || rc=$?
  "$runsc" --root "$t/state" delete --force "$id" >/dev/null 2>&1 || true
  # What runsc pins in its root without --gofer-network-namespace=new.
  while umount -l "$t/state/null-netns" 2>/dev/null; do :; done
  wrote=$(cat "$t/bundle/rootfs/corral-check" 2>/dev/null || true)
  rm -rf "$t"
  if [ "$rc" -ne 0 ] || ! grep -q 'Starting gVisor' <<<"$out"; then
    die "the runsc built from tools/runsc ($runsc, $version) cannot run a sandbox on this machine (exit $rc): $out"
  fi
  [ "$wrote" = corral ] ||
    die "a write to the root of a sandbox of $runsc (--overlay2=none) did not reach the host directory"
}

"${what}_deps"
bin=$(build)
"${what}_check" "$bin"
if ! cmp -s "$bin" "$dest"; then
  mkdir -p "$(dirname "$dest")"
  install -m 0755 "$bin" "$dest.tmp.$$"
  mv -f "$dest.tmp.$$" "$dest"
  log "installed $what $version as $dest"
fi
if [ "$(command -v "$what" || true)" != "$dest" ]; then
  log "note: $what on this PATH is \"$(command -v "$what" || true)\", not $dest: put $(dirname "$dest") first"
fi
echo "$dest"
