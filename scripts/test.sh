#!/usr/bin/env bash
# Runs every test tier of corral on a Debian machine as root: installs what
# the tiers need, opts them in, and fails if a required integration test
# was skipped. Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: run as root (the integration tiers drive runc, namespaces and cgroups)" >&2
  exit 1
fi

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v runc >/dev/null || need+=(runc)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v unshare >/dev/null || need+=(util-linux)
command -v npm >/dev/null || need+=(nodejs npm)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

export CGO_ENABLED=1 # the race detector needs cgo; the shipped binary is built with CGO_ENABLED=0
export CORRAL_TEST_ROOT=1

# Tests that must run and pass; a skip is a failure.
required=(
  internal/driver/fakedriver.TestConformance
  test/e2e.TestKillNineDuringCreates
  internal/execd.TestCommandUser
  test/e2e.TestInitAsPID1ExitCodeAndParent
  test/e2e.TestInitAsPID1ReapsOrphans
  test/e2e.TestInitAsPID1ForwardsSIGTERM
  internal/imagestore.TestPullUnpacksForOverlay
  internal/imagestore.TestImportDockerAndOCILayout
  internal/driver/oci.TestConformance
  test/e2e.TestOCIEndToEnd
  test/e2e.TestOCIStartFailuresAreExplained
  test/e2e.TestEscapeSuite
  test/e2e.TestHostImageWritesStayInTheSandbox
  test/e2e.TestOpenSandboxJavaScriptSDK
  test/e2e.TestSDKCommands
  test/e2e.TestSDKFilesAndTerminal
  test/e2e.TestSDKStreamReattachesAfterACut
  sdk.ExampleClient_CreateSandbox
  sdk.ExampleSandbox_Exec
  sdk.ExampleSandbox_Upload
  test/e2e.TestCLIAgainstARealSandbox
  test/e2e.TestCLIShellThroughAPseudoTerminal
  test/e2e.TestDocumentedExamples
)


go vet ./...
go test -race -json -timeout 60m ./... | go run ./hack/tiercheck "${required[@]}"
