#!/usr/bin/env bash
# Installs the OCI runtime corral's native runtime runs: runc, built from
# the Go module proxy at the release tools/runc/go.mod pins (Debian 12's
# own runc, 1.1.5, is open to the container escapes docs/runtime-oci.md
# lists). scripts/start.sh and scripts/test.sh call it; so does
# scripts/k8s.sh for its containerd.
#
#   scripts/runtimes.sh   build (or take from the cache) runc, check that it
#                         runs a container on this machine, install it as
#                         $CORRAL_RUNC_BIN (/usr/local/sbin/runc, before
#                         Debian's /usr/sbin/runc on PATH) and print that path
#
# runc needs cgo (its nsenter is C) and is built with seccomp against
# Debian's libseccomp-dev, as upstream's Makefile does; corral itself stays
# CGO_ENABLED=0. The binary is cached under $CORRAL_RUNTIMES_CACHE keyed on
# the release, the build flags, tools/runc's go.mod and go.sum, and the Go,
# C compiler and libseccomp versions; the build is reproducible, so a hit
# equals a rebuild. Everything but the path goes to stderr. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."

cache_root=${CORRAL_RUNTIMES_CACHE:-/var/cache/corral/runtimes}
dest=${CORRAL_RUNC_BIN:-/usr/local/sbin/runc}
tags="seccomp urfave_cli_no_docs"

log() { echo "runtimes.sh: $*" >&2; }
die() {
  log "$*"
  exit 1
}

[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages and $dest, and runs a container)"

# The release pinned: tools/runc/go.mod's, e.g. v1.5.3.
version=$(cd tools/runc && go list -m -f '{{.Version}}' github.com/opencontainers/runc)
# runc prints main.gitCommit as its "commit:" line. The module proxy
# serves the release's tree without its git hash, so it is the tag.
ldflags="-s -w -X main.gitCommit=$version"

deps() {
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

cache_key() {
  { echo "$version $tags $ldflags pie"; go version; "$(go env CC)" --version | sed -n 1p; pkg-config --modversion libseccomp
    cat tools/runc/go.mod tools/runc/go.sum; } |
    sha256sum | cut -c1-16
}

# build: prints the path of the cached binary, building it on a miss.
build() {
  local key dir
  key=$(cache_key)
  dir="$cache_root/runc-${version#v}-$key"
  if [ -x "$dir/runc" ]; then
    echo "$dir/runc"
    return
  fi
  local tmp="$dir.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  local start=$SECONDS
  log "building runc $version into $dir (cold: about a minute on 2 cores)"
  if ! (cd tools/runc && CGO_ENABLED=1 go build -mod=readonly -trimpath -buildmode=pie -tags "$tags" \
    -ldflags "$ldflags" -o "$tmp/runc" github.com/opencontainers/runc); then
    rm -rf "$tmp"
    die "building runc $version failed"
  fi
  rm -rf "$dir"
  mv "$tmp" "$dir"
  log "built in $((SECONDS - start)) s"
  echo "$dir/runc"
}

# check runc: fails unless runc reports the pinned release with seccomp and
# runs a container here: this machine's cgroup layout (limits on memory,
# pids and cpu), every namespace corral uses but the user namespace, a
# read-only root with /usr bound in, runc's default devices, masked and
# read-only paths, and a seccomp filter (which the process reports).
check() {
  local runc=$1 out
  out=$("$runc" --version) || die "$runc --version failed"
  [ "${out%%$'\n'*}" = "runc version ${version#v}" ] ||
    die "$runc --version says \"${out%%$'\n'*}\", not runc version ${version#v}"
  out=$("$runc" features) || die "$runc features failed"
  [[ "${out//[$' \n\t']/}" == *'"seccomp":{"enabled":true'* ]] ||
    die "$runc was built without seccomp (runc features: $out)"

  local t id=corral-runtimes-check-$$
  t=$(mktemp -d)
  mkdir -p "$t/bundle/rootfs" "$t/state"
  # The host's /usr holds the programs; the root's /bin and /lib are links
  # into it, as on a merged-/usr Debian.
  local l
  for l in bin lib lib64 sbin; do
    if [ -d "/usr/$l" ]; then ln -s "usr/$l" "$t/bundle/rootfs/$l"; fi
  done
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

deps
bin=$(build)
check "$bin"
if ! cmp -s "$bin" "$dest"; then
  mkdir -p "$(dirname "$dest")"
  install -m 0755 "$bin" "$dest.tmp.$$"
  mv -f "$dest.tmp.$$" "$dest"
  log "installed runc $version as $dest"
fi
if [ "$(command -v runc || true)" != "$dest" ]; then
  log "note: runc on this PATH is \"$(command -v runc || true)\", not $dest: put $(dirname "$dest") first"
fi
echo "$dest"
