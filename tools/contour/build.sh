#!/usr/bin/env bash
# Builds Contour, at the version pinned in go.mod/go.sum, into OUTDIR.
#
#   tools/contour/build.sh OUTDIR
#
# A static binary (CGO_ENABLED=0), reproducible paths (-trimpath), the release's version
# stamped into it so that `contour version` reports it. Lines starting with "==> " are
# stages; the other lines on stdout are packages as `go build -v` compiles them.
set -euo pipefail
out=${1:?usage: tools/contour/build.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")"

export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
module=github.com/projectcontour/contour
pkg=$module/cmd/contour

echo "==> fetching Go modules (once; they stay in the Go module cache)"
go mod download

info=$(go mod download -json "$module")
version=$(sed -n 's/^\t"Version": "\(.*\)",$/\1/p' <<<"$info")
ldflags="-s -w -X $module/internal/build.Version=${version}"

total=$(go list -deps "$pkg" | wc -l)
echo "==> building contour ($total packages; once, the Go build cache keeps them)"
go build -v -trimpath -ldflags "$ldflags" -o "$out/contour.tmp" "$pkg" 2>&1
mv -f "$out/contour.tmp" "$out/contour"
echo "==> built contour ${version}"
