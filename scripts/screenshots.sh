#!/usr/bin/env bash
# Regenerates the console's screenshots in docs/images (console-*.png) from
# the browser test, which takes them against a real server: as root, with
# the pinned runc (scripts/runtimes.sh) first on PATH and chromium installed.
set -euo pipefail
cd "$(dirname "$0")/.."
runc=$(scripts/runtimes.sh)
PATH=$(dirname "$runc"):$PATH
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
CORRAL_TEST_ROOT=1 CORRAL_TEST_ARTIFACTS="$out" go test ./test/e2e -run '^TestConsoleInABrowser$' -count=1 >/dev/null
for f in "$out"/console/*.png; do
	cp "$f" "docs/images/console-$(basename "$f")"
	echo "screenshots: docs/images/console-$(basename "$f")"
done
