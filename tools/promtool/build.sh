#!/usr/bin/env bash
# Builds promtool, at the Prometheus version pinned in go.mod/go.sum, into OUTDIR.
#
#   tools/promtool/build.sh OUTDIR
#
# A static binary (CGO_ENABLED=0, the netgo tag as Prometheus' release builds) without the
# optional service discoveries (the remove_all_sd tag: the chart's tests only check and test
# rules, and it builds about a fifth fewer packages), reproducible
# paths (-trimpath), the release's version and date stamped into it so that
# `promtool --version` reports them. Lines starting with "==> " are stages; the other lines on
# stdout are packages as `go build -v` compiles them.
set -euo pipefail
out=${1:?usage: tools/promtool/build.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")"

export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
module=github.com/prometheus/prometheus
pkg=$module/cmd/promtool
tags=netgo,remove_all_sd

echo "==> fetching Go modules (once; they stay in the Go module cache)"
go mod download

# The release's own version (its VERSION file: v0.316.0 is Prometheus 3.16.0) and date.
info=$(go mod download -json "$module")
dir=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' <<<"$info")
info_file=$(sed -n 's/.*"Info": "\(.*\)".*/\1/p' <<<"$info")
version=$(tr -d '[:space:]' <"$dir/VERSION")
date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info_file")
date=${date:-unknown}
stamp=github.com/prometheus/common/version
ldflags="-s -w -X $stamp.Version=${version} -X $stamp.BuildDate=${date}"

total=$(go list -tags "$tags" -deps "$pkg" | wc -l)
echo "==> building promtool ($total packages; once, the Go build cache keeps them)"
go build -v -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out/promtool.tmp" "$pkg" 2>&1
mv -f "$out/promtool.tmp" "$out/promtool"
echo "==> built promtool ${version}"
