#!/usr/bin/env bash
# Builds corral and starts the lifecycle server on its defaults
# (127.0.0.1:8080, state in /var/lib/corral for root). Extra arguments go
# to `corral serve`. Usage: scripts/start.sh [serve flags]
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
CGO_ENABLED=0 go build -o bin/corral ./cmd/corral
exec bin/corral serve "$@"
