#!/usr/bin/env bash
# Builds corral's code-interpreter image from Debian bookworm packages
# (debootstrap from the Debian mirror; no registry, no Docker engine) and
# prints the path of the result: a `docker save` tarball that
# `corral image import` and `docker load` take, named
# corral/code-interpreter:local. Kernels: Python (ipykernel, with numpy,
# pandas, scipy, matplotlib) and R (IRkernel).
#
# The result is cached under $CORRAL_IMAGE_CACHE (default
# /var/cache/corral/images) by a digest of this directory, so CI builds it
# once per change of the recipe. Needs root. Usage: images/code-interpreter/build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${CORRAL_IMAGE_CACHE:-/var/cache/corral/images}
mirror=${CORRAL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
key=$(cat "$here"/build.sh "$here"/packages.txt "$root"/hack/mkimage/main.go | sha256sum | cut -c1-16)
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
umount "$work/rootfs/proc"
: >"$work/rootfs/etc/resolv.conf"

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
