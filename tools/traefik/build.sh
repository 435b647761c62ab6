#!/usr/bin/env bash
# Builds Traefik, at the version pinned in go.mod/go.sum, into OUTDIR.
#
#   tools/traefik/build.sh OUTDIR
#
# A static binary (CGO_ENABLED=0), reproducible paths (-trimpath), the release's version and
# date stamped into it so that `traefik version` reports them. Lines starting with "==> " are
# stages; the other lines on stdout are packages as `go build -v` compiles them.
set -euo pipefail
out=${1:?usage: tools/traefik/build.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")"

export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
module=github.com/traefik/traefik/v3
pkg=$module/cmd/traefik

echo "==> fetching Go modules (once; they stay in the Go module cache)"
go mod download

info=$(go mod download -json "$module")
version=$(sed -n 's/^\t"Version": "\(.*\)",$/\1/p' <<<"$info")
info_file=$(sed -n 's/.*"Info": "\(.*\)".*/\1/p' <<<"$info")
date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info_file")
ldflags="-s -w -X $module/pkg/version.Version=${version} -X $module/pkg/version.BuildDate=${date:-unknown}"

total=$(go list -deps "$pkg" | wc -l)
echo "==> building traefik ($total packages; once, the Go build cache keeps them)"
go build -v -trimpath -ldflags "$ldflags" -o "$out/traefik.tmp" "$pkg" 2>&1
mv -f "$out/traefik.tmp" "$out/traefik"
echo "==> built traefik ${version}"
