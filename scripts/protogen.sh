#!/usr/bin/env bash
# Regenerates the Go code of corral's protobuf definitions (today E2B's
# envd services, internal/e2b/envd) with buf, protoc-gen-go and
# protoc-gen-connect-go at the releases tools/protogen pins. The
# generated files are committed; run this after changing a .proto.
# Usage: scripts/protogen.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd tools/protogen && go build -o "$bin/" github.com/bufbuild/buf/cmd/buf google.golang.org/protobuf/cmd/protoc-gen-go connectrpc.com/connect/cmd/protoc-gen-connect-go)
(cd internal/e2b/envd && PATH=$bin:$PATH buf generate)
