#!/usr/bin/env bash
# Installs what the native runtime needs (runc), builds corral and starts the
# lifecycle server on its defaults: 127.0.0.1:8080, the native runtime,
# state in /var/lib/corral. Extra arguments go to `corral serve`.
# Usage: scripts/start.sh [serve flags]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v runc >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runc >/dev/null
fi
mkdir -p bin
CGO_ENABLED=0 go build -o bin/corral ./cmd/corral
exec bin/corral serve "$@"
