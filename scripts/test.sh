#!/usr/bin/env bash
# Runs every test tier of corral on a Debian machine as root: installs what
# the tiers need, opts them in, and fails if a required integration test
# was skipped. Starts dockerd for the Docker tier if none runs (and stops
# it at the end). Usage: scripts/test.sh
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
command -v dockerd >/dev/null || need+=(docker.io)
command -v curl >/dev/null || need+=(curl)
command -v ip >/dev/null || need+=(iproute2)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The Docker tier needs an engine. Start one (with --live-restore, as
# production should run it) unless one answers already, and stop it after.
if ! curl -sf --unix-socket /var/run/docker.sock http://docker/_ping >/dev/null 2>&1; then
  dockerd --live-restore >/tmp/corral-ci-dockerd.log 2>&1 &
  dockerd_pid=$!
  trap 'kill "$dockerd_pid" 2>/dev/null; wait "$dockerd_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 1 60); do
    curl -sf --unix-socket /var/run/docker.sock http://docker/_ping >/dev/null 2>&1 && break
    kill -0 "$dockerd_pid" 2>/dev/null || { cat /tmp/corral-ci-dockerd.log >&2; echo "scripts/test.sh: dockerd exited" >&2; exit 1; }
    sleep 1
  done
  curl -sf --unix-socket /var/run/docker.sock http://docker/_ping >/dev/null || { echo "scripts/test.sh: dockerd did not answer in 60 s" >&2; exit 1; }
fi

export CGO_ENABLED=1 # the race detector needs cgo; the shipped binary is built with CGO_ENABLED=0
export CORRAL_TEST_ROOT=1
export CORRAL_TEST_DOCKER=1

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
  internal/driver/oci.TestWarmPool
  test/e2e.TestOCIWarmPool
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
  internal/egress/nft.TestEnforcement
  internal/egress.TestEnforcerEndToEnd
  internal/driver/uplink.TestAttachRoutesOutAndNowhereElse
  test/e2e.TestOCIEgressPolicy
  test/e2e.TestDockerEgressPolicy
  test/e2e.TestOCICredentialVault
  test/e2e.TestDockerCredentialVault
  test/e2e.TestOCISecretsOnDemand
  internal/driver/docker.TestConformance
  internal/driver/docker.TestConformanceRemote
  test/e2e.TestDockerEndToEnd
  test/e2e.TestDockerEscapeSuite
  test/e2e.TestOpenSandboxJavaScriptSDKDocker
  test/e2e.TestDockerEngineOutage
)


go vet ./...
go test -race -json -timeout 60m ./... | go run ./hack/tiercheck "${required[@]}"
