#!/usr/bin/env bash
# A real single-node Kubernetes for corral's kube tests, built from the Go
# module proxy (tools/k8s, tools/etcd), Debian's containerd and CNI plugins,
# and the runc scripts/runtimes.sh pins. See docs/kubernetes.md ("Testing
# against a real cluster").
#
#   scripts/k8s.sh build   build (or take from the cache) the binaries; prints their dir
#   scripts/k8s.sh up      build, then start etcd, apiserver, controller-manager,
#                          scheduler, containerd and kubelet under $CORRAL_K8S_DIR
#   scripts/k8s.sh down    stop all of it and undo every host change it made
#
# The binaries are cached under $CORRAL_K8S_CACHE keyed on the build modules'
# go.sum and the Go version; the builds are reproducible, so a hit equals a
# rebuild. All cluster state lives in $CORRAL_K8S_DIR; `up` writes
# $CORRAL_K8S_DIR/env (KUBECONFIG, CORRAL_TEST_KUBE_*), which tests read.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
cache_root=${CORRAL_K8S_CACHE:-/var/cache/corral-k8s}
dir=${CORRAL_K8S_DIR:-/var/lib/corral-k8s}
bridge=k8sbr0
node_ip=10.88.0.1
pod_cidr=10.88.0.0/16

log() { echo "k8s.sh: $*" >&2; }

cache_key() {
  { echo "$K8S_VERSION $ETCD_VERSION"; go version; cat tools/k8s/go.mod tools/k8s/go.sum tools/etcd/go.mod tools/etcd/go.sum; } |
    sha256sum | cut -c1-16
}

build() {
  local bin="$cache_root/$(cache_key)"
  if [ -x "$bin/kubelet" ] && [ -x "$bin/etcd" ]; then
    echo "$bin"
    return
  fi
  local tmp="$bin.tmp.$$"
  mkdir -p "$tmp"
  local start=$SECONDS
  local pkg=k8s.io/component-base/version
  local minor=${K8S_VERSION#v1.}
  minor=${minor%%.*}
  local ld="-s -w -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ld="$ld -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  ld="$ld -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
  log "building Kubernetes $K8S_VERSION and etcd $ETCD_VERSION into $bin (cold: about 16 minutes on 2 cores)"
  (cd tools/k8s && CGO_ENABLED=0 go build -mod=readonly -trimpath -tags selinux,notest -ldflags "$ld" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet)
  (cd tools/etcd && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
  rm -rf "$bin"
  mv "$tmp" "$bin"
  log "built in $((SECONDS - start)) s"
  echo "$bin"
}


# pids of what `up` started, one per line, in start order.
pidfile() { echo "$dir/pids"; }

# ours pid: whether pid runs one of the processes `up` started (every one
# has $dir on its command line, so a pid reused after a reboot is not).
ours() {
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$dir/"
}

# live_pids: prints the pidfile's pids that are still ours; fails if none is.
live_pids() {
  local p name found=
  while read -r p name; do
    if [ -n "$p" ] && ours "$p"; then
      printf '%s ' "$p"
      found=1
    fi
  done <"$(pidfile)"
  [ -n "$found" ]
}

start_bg() { # name cmd...: runs cmd in the background, logging to $dir/log/name.log
  local name=$1
  shift
  "$@" >"$dir/log/$name.log" 2>&1 &
  echo "$! $name" >>"$(pidfile)"
}

wait_for() { # what seconds cmd...
  local what=$1 secs=$2
  shift 2
  local i
  for ((i = 0; i < secs * 10; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  log "$what did not come up in ${secs} s; its log:"
  tail -n 30 "$dir/log/$what.log" >&2 || true
  return 1
}

certs() {
  local c=$dir/pki
  mkdir -p "$c"
  (
    cd "$c"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=corral-test-ca -keyout ca.key -out ca.crt 2>/dev/null
    sign() { # name subject [san]
      openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
      if [ -n "${3:-}" ]; then echo "subjectAltName=$3" >"$1.ext"; else : >"$1.ext"; fi
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    }
    sign apiserver /CN=kube-apiserver "IP:127.0.0.1,IP:$node_ip,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
    sign admin "/O=system:masters/CN=corral-test-admin"
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
  cat >"$dir/kubeconfig" <<EOK
apiVersion: v1
kind: Config
clusters:
- name: corral-test
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: $c/ca.crt
users:
- name: admin
  user:
    client-certificate: $c/admin.crt
    client-key: $c/admin.key
contexts:
- name: corral-test
  context: {cluster: corral-test, user: admin}
current-context: corral-test
EOK
}

# image_tar out ref binary: a single-layer docker-archive holding binary as
# its entrypoint, written with tar and JSON only.
image_tar() {
  local out=$1 ref=$2 bin=$3 t
  t=$(mktemp -d)
  mkdir -p "$t/root"
  cp "$bin" "$t/root/$(basename "$bin")"
  tar -C "$t/root" --owner=0 --group=0 --mtime=@0 -cf "$t/layer.tar" .
  local diff
  diff=sha256:$(sha256sum "$t/layer.tar" | cut -d' ' -f1)
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/%s"]},"rootfs":{"type":"layers","diff_ids":["%s"]}}' \
    "$(basename "$bin")" "$diff" >"$t/config.json"
  printf '[{"Config":"config.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' "$ref" >"$t/manifest.json"
  tar -C "$t" -cf "$out" manifest.json config.json layer.tar
  rm -rf "$t"
}

up() {
  [ "$(id -u)" -eq 0 ] || { log "run as root"; exit 1; }
  if [ -f "$(pidfile)" ]; then
    if live_pids >/dev/null; then
      log "a cluster runs from $dir (pids: $(live_pids)); run 'scripts/k8s.sh down' first"
      exit 1
    fi
    # An earlier run ended without `down` (a reboot, a SIGKILL): nothing of
    # it runs any more, so what it left is undone before starting afresh.
    log "$dir/pids is stale (none of its processes runs): undoing what that run left"
    down
  fi
  local need=()
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
  command -v containerd >/dev/null || need+=(containerd)
  command -v iptables >/dev/null || need+=(iptables)
  command -v openssl >/dev/null || need+=(openssl)
  command -v curl >/dev/null || need+=(curl)
  if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  # Pods run on the runc corral pins (Debian's containerd pulls in its
  # older runc too; BinaryName below says which one).
  local runc
  runc=$(scripts/runtimes.sh)
  local bin
  bin=$(build)
  local start=$SECONDS
  rm -rf "$dir"
  mkdir -p "$dir/log" "$dir/etcd" "$dir/cni/net.d" "$dir/cni/ipam" "$dir/containerd" "$dir/kubelet"
  : >"$(pidfile)"
  certs
  local c=$dir/pki

  # The node's address: a bridge that the CNI plugin then uses for pods
  # (the kernel here has no dummy device, and kubelet refuses loopback).
  ip link add "$bridge" type bridge
  ip addr add "$node_ip/16" dev "$bridge"
  ip link set "$bridge" up
  # Pods talk to each other across the bridge; nothing of theirs is
  # forwarded anywhere else (no masquerade, and this drop).
  iptables -I FORWARD 1 -i "$bridge" -o "$bridge" -j ACCEPT
  iptables -I FORWARD 2 -i "$bridge" ! -o "$bridge" -j DROP

  start_bg etcd "$bin/etcd" --data-dir "$dir/etcd" --listen-client-urls http://127.0.0.1:2379 \
    --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
    --initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster default=http://127.0.0.1:2380 \
    --unsafe-no-fsync
  wait_for etcd 30 curl -sf http://127.0.0.1:2379/health

  start_bg kube-apiserver "$bin/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
    --bind-address 127.0.0.1 --secure-port 6443 --advertise-address 127.0.0.1 --endpoint-reconciler-type none \
    --service-cluster-ip-range 10.96.0.0/16 --client-ca-file "$c/ca.crt" \
    --tls-cert-file "$c/apiserver.crt" --tls-private-key-file "$c/apiserver.key" \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$c/sa.pub" \
    --service-account-signing-key-file "$c/sa.key" --authorization-mode Node,RBAC \
    --kubelet-client-certificate "$c/admin.crt" --kubelet-client-key "$c/admin.key" \
    --kubelet-preferred-address-types InternalIP --allow-privileged=true
  wait_for kube-apiserver 60 curl -sf --cacert "$c/ca.crt" --cert "$c/admin.crt" --key "$c/admin.key" https://127.0.0.1:6443/readyz

  start_bg kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$dir/kubeconfig" \
    --authentication-kubeconfig "$dir/kubeconfig" --authorization-kubeconfig "$dir/kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --service-account-private-key-file "$c/sa.key" \
    --root-ca-file "$c/ca.crt" --use-service-account-credentials=false \
    --enable-hostpath-provisioner
  start_bg kube-scheduler "$bin/kube-scheduler" --kubeconfig "$dir/kubeconfig" \
    --authentication-kubeconfig "$dir/kubeconfig" --authorization-kubeconfig "$dir/kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false

  # CNI mounts each pod's network namespace under /run/netns. The first
  # `ip netns add` on a machine (the tests run it) bind-mounts /run/netns
  # onto itself; if containerd had mounted a namespace there before, that
  # hides the namespace's mount, containerd can never remove it (unlinkat:
  # device or resource busy) and the pod stays Terminating for good. So
  # /run/netns is that mount point before containerd starts, as ip makes it
  # (and, as ip does, it is left so after down: a later run needs it too).
  mkdir -p /run/netns
  if ! mountpoint -q /run/netns; then
    mount --bind /run/netns /run/netns
  fi
  mount --make-shared /run/netns

  # A containerd of our own next to Docker's, with CRI on.
  local ctrd=$dir/containerd
  cat >"$ctrd/config.toml" <<EOC
version = 2
root = "$ctrd/root"
state = "$ctrd/state"
[grpc]
  address = "$ctrd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      BinaryName = "$runc"
EOC
  cat >"$dir/cni/net.d/10-corral-test.conflist" <<EOC
{"cniVersion": "0.4.0", "name": "corral-test", "plugins": [
  {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam",
            "ranges": [[{"subnet": "$pod_cidr", "gateway": "$node_ip"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOC
  start_bg containerd containerd --config "$ctrd/config.toml"
  wait_for containerd 30 ctr -a "$ctrd/containerd.sock" version

  # Nothing can be pulled here: the pod sandbox image is built locally.
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/pause" ./tools/pause
  image_tar "$dir/pause.tar" registry.k8s.io/pause:3.10 "$dir/pause"
  ctr -a "$ctrd/containerd.sock" -n k8s.io images import "$dir/pause.tar" >/dev/null

  cat >"$dir/kubelet/config.yaml" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
address: $node_ip
readOnlyPort: 0
failSwapOn: false
containerRuntimeEndpoint: unix://$ctrd/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $c/ca.crt}
authorization: {mode: Webhook}
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
# Every pod's processes and threads are bounded, as corral's other
# runtimes bound each sandbox's (Kubernetes has no per-pod setting).
podPidsLimit: 4096
EOC
  start_bg kubelet "$bin/kubelet" --config "$dir/kubelet/config.yaml" --kubeconfig "$dir/kubeconfig" \
    --root-dir "$dir/kubelet/root" --cert-dir "$dir/kubelet/pki" --node-ip "$node_ip" --hostname-override corral-test-node
  # Asked with curl: a fresh machine has no kubectl.
  local api=(curl -sf --cacert "$c/ca.crt" --cert "$c/admin.crt" --key "$c/admin.key")
  wait_for kubelet 60 sh -c "${api[*]} https://127.0.0.1:6443/api/v1/nodes/corral-test-node |
    tr -d ' \n' | grep -q '\"type\":\"Ready\",\"status\":\"True\"'"
  wait_for kube-controller-manager 60 "${api[@]}" -o /dev/null https://127.0.0.1:6443/api/v1/namespaces/default/serviceaccounts/default
  # The default storage class: the controller-manager's hostPath
  # provisioner (a directory under /tmp/hostpath_pv per claim, removed with
  # it), which is for single-node test clusters only. Named volumes' claims
  # bind to it.
  "${api[@]}" -o /dev/null -X POST -H 'Content-Type: application/json' \
    https://127.0.0.1:6443/apis/storage.k8s.io/v1/storageclasses -d '{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass",
      "metadata":{"name":"corral-test-hostpath","annotations":{"storageclass.kubernetes.io/is-default-class":"true"}},
      "provisioner":"kubernetes.io/host-path","reclaimPolicy":"Delete","volumeBindingMode":"Immediate"}' ||
    log "could not create the default storage class (named volumes will not bind)"

  cat >"$dir/env" <<EOE
KUBECONFIG=$dir/kubeconfig
CORRAL_TEST_KUBE_CONTAINERD=$ctrd/containerd.sock
CORRAL_TEST_KUBE_NODE=corral-test-node
KUBEBUILDER_ASSETS=$bin
EOE
  log "cluster up in $((SECONDS - start)) s; export \$(cat $dir/env)"
}

down() {
  local p name
  if [ -f "$(pidfile)" ]; then
    # Stop in reverse start order: kubelet (and its pods) first, etcd last.
    tac "$(pidfile)" | while read -r p name; do
      ours "$p" || continue
      # The pods' containers outlive kubelet; end them through containerd
      # before it stops (whether kubelet was still running or not).
      if [ "$name" = containerd ]; then crictl_rm_all "$dir/containerd/containerd.sock"; fi
      kill "$p" 2>/dev/null || true
      wait_for_exit "$p" 20
    done
  fi
  # What kubelet and containerd leave mounted.
  { grep -E " ($dir|/run/netns/cni-)[^ ]*" /proc/self/mounts || true; } | cut -d' ' -f2 | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  for ns in $(ip netns list 2>/dev/null | awk '/^cni-/{print $1}'); do ip netns delete "$ns" 2>/dev/null || true; done
  ip link delete "$bridge" 2>/dev/null || true
  while iptables -D FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null; do :; done
  while iptables -D FORWARD -i "$bridge" ! -o "$bridge" -j DROP 2>/dev/null; do :; done
  # kubelet's cgroups, deepest first, in every v1 hierarchy (and v2).
  local cg
  for cg in /sys/fs/cgroup/kubepods* /sys/fs/cgroup/*/kubepods*; do
    [ -d "$cg" ] || continue
    find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  rm -rf "$dir" /tmp/hostpath_pv
}

wait_for_exit() { # pid seconds: SIGKILL after the grace
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$1" 2>/dev/null || true
}

crictl_rm_all() { # every task and container of our containerd, in every namespace
  local a=$1 ns id
  [ -S "$a" ] || return 0
  for ns in $(ctr -a "$a" namespaces ls -q 2>/dev/null); do
    for id in $(ctr -a "$a" -n "$ns" tasks ls -q 2>/dev/null); do
      ctr -a "$a" -n "$ns" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 0.5
    for id in $(ctr -a "$a" -n "$ns" tasks ls -q 2>/dev/null); do
      ctr -a "$a" -n "$ns" tasks delete -f "$id" >/dev/null 2>&1 || true
    done
    for id in $(ctr -a "$a" -n "$ns" containers ls -q 2>/dev/null); do
      ctr -a "$a" -n "$ns" containers delete "$id" >/dev/null 2>&1 || true
    done
  done
}

case "${1:-}" in
build) build ;;
up) up ;;
down) down ;;
*)
  echo "usage: scripts/k8s.sh build|up|down" >&2
  exit 2
  ;;
esac
