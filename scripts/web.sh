#!/usr/bin/env bash
# Builds the web console (web/, Vite) into internal/console/dist, which is
# committed and embedded in the binary: run this after changing web/ and
# commit the result. Needs node and npm (the registry).
set -euo pipefail
cd "$(dirname "$0")/../web"
npm ci --no-audit --no-fund
npm run build
