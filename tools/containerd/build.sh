#!/usr/bin/env bash
# Builds containerd, containerd-shim-runc-v2 and ctr, at the version pinned in go.mod/go.sum,
# into OUTDIR: the local node's container runtime (`ome-routing dev up --node`).
#
#   tools/containerd/build.sh OUTDIR
#
# Static binaries (CGO_ENABLED=0, so without the btrfs snapshotter, which needs cgo),
# reproducible paths (-trimpath), and the release's version stamped in as containerd's own
# Makefile does it. Lines starting with "==> " are stages; the other lines on stdout are
# packages as `go build -v` compiles them.
set -euo pipefail
out=${1:?usage: tools/containerd/build.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")"

export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
module=github.com/containerd/containerd/v2

echo "==> fetching Go modules (once; they stay in the Go module cache)"
go mod download

info=$(go mod download -json "$module")
version=$(sed -n 's/^\t"Version": "\(.*\)",$/\1/p' <<<"$info")
commit=$(sed -n 's/.*"Hash": "\([0-9a-f]*\)".*/\1/p' <<<"$info")
ldflags="-s -w -X $module/version.Version=${version} -X $module/version.Revision=${commit:-unknown}"
ldflags+=" -X $module/version.Package=$module"

for name in containerd containerd-shim-runc-v2 ctr; do
  pkg=$module/cmd/$name
  total=$(go list -tags no_btrfs -deps "$pkg" | wc -l)
  echo "==> building $name ($total packages; once, the Go build cache keeps them)"
  go build -v -trimpath -tags no_btrfs -ldflags "$ldflags" -o "$out/$name.tmp" "$pkg" 2>&1
  mv -f "$out/$name.tmp" "$out/$name"
done
echo "==> built containerd ${version}"
