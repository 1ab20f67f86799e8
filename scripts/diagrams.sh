#!/usr/bin/env bash
# Renders the diagrams in docs/diagrams (Graphviz sources, *.dot) to SVG
# beside them. The SVGs are checked in; run this after changing a source.
set -euo pipefail
cd "$(dirname "$0")/../docs/diagrams"
if ! command -v dot >/dev/null; then
	echo "diagrams: Graphviz is needed: apt-get install graphviz" >&2
	exit 1
fi
for src in *.dot; do
	dot -Tsvg "$src" -o "${src%.dot}.svg"
	echo "diagrams: ${src%.dot}.svg"
done
