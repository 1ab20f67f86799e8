#!/usr/bin/env bash
# Installs what the native runtime needs (runc, built at the release
# tools/runc pins: scripts/runtimes.sh), builds corral and starts the
# lifecycle server on its defaults: 127.0.0.1:8080, the native runtime,
# state in /var/lib/corral. Extra arguments go to `corral serve`.
# Usage: scripts/start.sh [serve flags]
set -euo pipefail
cd "$(dirname "$0")/.."
# The server runs the runc first on PATH: the pinned one, not a
# distribution's older runc that may be installed too.
runc=$(scripts/runtimes.sh)
PATH=$(dirname "$runc"):$PATH
mkdir -p bin
CGO_ENABLED=0 go build -o bin/corral ./cmd/corral
exec bin/corral serve "$@"
