#!/usr/bin/env bash
# Builds kube-apiserver and etcd, at the versions pinned in go.mod/go.sum, into OUTDIR; with
# --node, the node's binaries instead: kubelet, kube-controller-manager, kube-scheduler and
# kube-proxy, of the same k8s.io/kubernetes release (`ome-routing dev up --node`).
#
#   tools/build.sh OUTDIR
#   tools/build.sh --node OUTDIR
#
# Static binaries (CGO_ENABLED=0), reproducible paths (-trimpath), and the release's version
# stamped in the way Kubernetes' own build does it, so that /version reports it. Lines starting
# with "==> " are stages; the other lines on stdout are packages as `go build -v` compiles them.
set -euo pipefail
node=false
if [[ ${1:-} == --node ]]; then
  node=true
  shift
fi
out=${1:?usage: tools/build.sh [--node] OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")"

export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
apiserver_pkg=k8s.io/kubernetes/cmd/kube-apiserver
etcd_pkg=go.etcd.io/etcd/server/v3

echo "==> checking the staging replaces against k8s.io/kubernetes's go.mod"
./pin-kubernetes.sh --check

echo "==> fetching Go modules (once; they stay in the Go module cache)"
go mod download

# A module's version, commit and date, from the module proxy's record of its release.
origin() { # MODULE -> "VERSION COMMIT DATE", "-" for what the record lacks
  local info info_file version commit date
  info=$(go mod download -json "$1")
  info_file=$(sed -n 's/.*"Info": "\(.*\)".*/\1/p' <<<"$info")
  version=$(sed -n 's/^\t"Version": "\(.*\)",$/\1/p' <<<"$info")
  commit=$(sed -n 's/.*"Hash": "\([0-9a-f]*\)".*/\1/p' <<<"$info")
  date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info_file")
  echo "${version:--} ${commit:--} ${date:--}"
}
read -r version commit date < <(origin k8s.io/kubernetes)
[[ $version =~ ^v([0-9]+)\.([0-9]+)\. ]] || { echo "build: bad version '$version'" >&2; exit 1; }
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X ${pkg}.gitVersion=${version} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor}"
  ldflags+=" -X ${pkg}.gitCommit=${commit} -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=${date}"
done

build() { # NAME PACKAGE LDFLAGS
  local total
  total=$(go list -deps "$2" | wc -l)
  echo "==> building $1 ($total packages; once, the Go build cache keeps them)"
  go build -v -trimpath -ldflags "$3" -o "$out/$1.tmp" "$2" 2>&1
  mv -f "$out/$1.tmp" "$out/$1"
}

if $node; then
  for name in kubelet kube-controller-manager kube-scheduler kube-proxy; do
    build "$name" "k8s.io/kubernetes/cmd/$name" "$ldflags"
  done
  echo "==> built kubelet, kube-controller-manager, kube-scheduler and kube-proxy ${version}"
  exit 0
fi
build kube-apiserver "$apiserver_pkg" "$ldflags"
read -r etcd_version etcd_commit _ < <(origin go.etcd.io/etcd/server/v3)
etcd_ldflags="-s -w"
[[ $etcd_commit == - ]] || etcd_ldflags+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=${etcd_commit:0:9}"
build etcd "$etcd_pkg" "$etcd_ldflags"
echo "==> built kube-apiserver ${version} and etcd ${etcd_version}"
