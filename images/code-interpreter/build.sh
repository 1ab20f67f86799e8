#!/usr/bin/env bash
# Builds corral's code-interpreter image from Debian bookworm packages
# (debootstrap from the Debian mirror; no registry, no Docker engine) and
# prints the path of the result: a `docker save` tarball that
# `corral image import` and `docker load` take, named
# corral/code-interpreter:local. Kernels: Python (ipykernel, with numpy,
# pandas, scipy, matplotlib), R (IRkernel), JavaScript and TypeScript
# (tslab, from npm), bash and Go (kernels/corral_kernels.py; Go through
# goeval, a yaegi interpreter built from the Go module proxy).
#
# The result is cached under $CORRAL_IMAGE_CACHE (default
# /var/cache/corral/images) by a digest of this directory, so CI builds it
# once per change of the recipe. Needs root. Usage: images/code-interpreter/build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${CORRAL_IMAGE_CACHE:-/var/cache/corral/images}
mirror=${CORRAL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
key=$(cat "$here"/build.sh "$here"/packages.txt "$root"/hack/mkimage/main.go "$here"/kernels/* "$here"/goeval/go.mod "$here"/goeval/go.sum "$here"/goeval/*.go | sha256sum | cut -c1-16)
out=$cache/code-interpreter-$key.tar
if [ -s "$out" ]; then
  echo "$out"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "images/code-interpreter/build.sh: run as root (debootstrap)" >&2
  exit 1
fi
command -v debootstrap >/dev/null || {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
}
mkdir -p "$cache"
work=$(mktemp -d /var/tmp/corral-image.XXXXXX)
cleanup() {
  for m in proc sys dev; do umount "$work/rootfs/$m" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
list() { grep -v '^#' "$1" | grep -v '^$' | paste -sd, -; }

# debootstrap lays the minimal root; apt installs the rest (debootstrap's
# own resolver cannot pick providers of virtual packages).
echo "code-interpreter: debootstrap bookworm" >&2
debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -30 "$work/debootstrap.log" >&2; exit 1; }
echo "code-interpreter: apt-get install $(list "$here/packages.txt")" >&2
cp /etc/resolv.conf "$work/rootfs/etc/resolv.conf"
cat >"$work/rootfs/etc/apt/sources.list" <<LIST
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${mirror%/debian}/debian-security bookworm-security main
LIST
mount -t proc proc "$work/rootfs/proc"
chroot "$work/rootfs" apt-get update -qq >"$work/apt.log" 2>&1 || { tail -30 "$work/apt.log" >&2; exit 1; }
DEBIAN_FRONTEND=noninteractive chroot "$work/rootfs" apt-get install -y -qq --no-install-recommends \
  $(grep -v '^#' "$here/packages.txt") >>"$work/apt.log" 2>&1 || { tail -30 "$work/apt.log" >&2; exit 1; }
# JavaScript and TypeScript: tslab from npm (its ZeroMQ binding ships
# built for linux-x64), at the release this script pins.
# The host's certificate authorities for the download (a machine that
# reaches the registry through an intercepting proxy trusts its CA
# there); the image keeps its own.
echo "code-interpreter: npm install -g tslab@1.0.22" >&2
cp /etc/ssl/certs/ca-certificates.crt "$work/rootfs/tmp/host-ca.crt"
chroot "$work/rootfs" npm install -g --no-audit --no-fund --no-update-notifier --cafile /tmp/host-ca.crt tslab@1.0.22 >"$work/npm.log" 2>&1 || { tail -30 "$work/npm.log" >&2; exit 1; }
rm -f "$work/rootfs/tmp/host-ca.crt"
chroot "$work/rootfs" node -e 'require("/usr/local/lib/node_modules/tslab/node_modules/zeromq")' ||
  { echo "images/code-interpreter/build.sh: tslab's ZeroMQ binding does not load" >&2; exit 1; }
rm -rf "$work/rootfs/root/.npm"
umount "$work/rootfs/proc"
: >"$work/rootfs/etc/resolv.conf"

# Go: corral-go-eval (goeval/, yaegi from the Go module proxy), static.
echo "code-interpreter: build corral-go-eval" >&2
(cd "$here/goeval" && CGO_ENABLED=0 go build -trimpath -o "$work/rootfs/usr/local/bin/corral-go-eval" .)
mkdir -p "$work/rootfs/usr/local/share/corral/kernels"
cp "$here/kernels/corral_kernels.py" "$work/rootfs/usr/local/share/corral/kernels/"

# A kernelspec named python (the name OpenSandbox's clients and images
# use), beside Debian's python3; frozen modules off, so the debugger does
# not warn on every start.
mkdir -p "$work/rootfs/usr/local/share/jupyter/kernels/python" "$work/rootfs/workspace"
cat >"$work/rootfs/usr/local/share/jupyter/kernels/python/kernel.json" <<'JSON'
{
 "argv": ["/usr/bin/python3", "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
 "display_name": "Python 3",
 "language": "python",
 "metadata": {"debugger": true}
}
JSON
# The kernelspecs of the languages Debian does not package kernels for:
# named after their language, which is what contexts ask for.
spec() { # name display argv-json [env-json]
  mkdir -p "$work/rootfs/usr/local/share/jupyter/kernels/$1"
  printf '{"argv": %s, "display_name": "%s", "language": "%s"%s}\n' "$3" "$2" "$1" "${4:+, \"env\": $4}" \
    >"$work/rootfs/usr/local/share/jupyter/kernels/$1/kernel.json"
}
spec javascript JavaScript '["/usr/local/bin/tslab", "kernel", "--config-path", "{connection_file}", "--js"]'
spec typescript TypeScript '["/usr/local/bin/tslab", "kernel", "--config-path", "{connection_file}"]'
spec bash Bash '["/usr/bin/python3", "-m", "corral_kernels", "bash", "-f", "{connection_file}"]' '{"PYTHONPATH": "/usr/local/share/corral/kernels"}'
spec go Go '["/usr/bin/python3", "-m", "corral_kernels", "go", "-f", "{connection_file}"]' '{"PYTHONPATH": "/usr/local/share/corral/kernels"}'

chroot "$work/rootfs" apt-get clean
rm -rf "$work/rootfs"/var/lib/apt/lists/* "$work/rootfs"/var/cache/apt/*.bin "$work/rootfs"/var/log/*.log "$work/rootfs"/tmp/*

tar --numeric-owner -C "$work/rootfs" --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -cf "$work/layer.tar" .
(cd "$root" && go run ./hack/mkimage -layer "$work/layer.tar" -ref corral/code-interpreter:local \
  -env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin -env LANG=C.UTF-8 \
  -env PYDEVD_DISABLE_FILE_VALIDATION=1 -env HOME=/root -workdir /workspace -cmd '["sleep","infinity"]' \
  -label org.opencontainers.image.title=corral-code-interpreter -o "$out.tmp")
mv "$out.tmp" "$out"
# Older builds of the recipe go.
find "$cache" -maxdepth 1 -name 'code-interpreter-*.tar' ! -name "$(basename "$out")" -delete
echo "$out"
