#!/usr/bin/env bash
# Pins k8s.io/kubernetes in this module, and with it every k8s.io staging module.
#
#   tools/pin-kubernetes.sh v1.34.12   # move to another release, rewrite go.mod/go.sum
#   tools/pin-kubernetes.sh --check    # fail if go.mod's replaces do not match the pinned release
#
# k8s.io/kubernetes requires its staging modules (k8s.io/api, k8s.io/apiserver, ...) at v0.0.0
# and replaces them with directories of its own repository, which a module that depends on it
# cannot see. Each of them is published on its own as v0.MINOR.PATCH for release v1.MINOR.PATCH.
# The list is read from the release's own go.mod, never kept by hand, so a new release that adds
# or drops a staging module needs nothing more than this script.
set -euo pipefail
cd "$(dirname "$0")"

mode=update
if [[ ${1:-} == --check ]]; then
  mode=check
  shift
fi
version=${1:-$(go mod edit -json | sed -n '/"Path": "k8s.io\/kubernetes"/{n;s/.*"Version": "\(.*\)".*/\1/p;}')}
if [[ ! $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]]; then
  echo "pin-kubernetes: version must look like v1.34.12, got '${version}'" >&2
  exit 2
fi
staging="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"

# The release's go.mod, fetched through the module proxy (outside this module, so that a go.mod
# that is not yet complete cannot get in the way).
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
upstream=$(cd "$scratch" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@${version}" |
  sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
[[ -f $upstream ]] || { echo "pin-kubernetes: no go.mod for k8s.io/kubernetes@${version}" >&2; exit 1; }

# Every `k8s.io/NAME v0.0.0` in its require blocks is a staging module.
mapfile -t modules < <(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "$upstream" | sort -u)
if (( ${#modules[@]} == 0 )); then
  echo "pin-kubernetes: k8s.io/kubernetes@${version} requires no staging module at v0.0.0" >&2
  exit 1
fi
go_line=$(awk '$1 == "go" { print $2; exit }' "$upstream")

edits=("-go=${go_line}" "-require=k8s.io/kubernetes@${version}")
# Its GODEBUG defaults (`godebug default=go1.24`), so the binary behaves as the release does.
while read -r setting; do
  edits+=("-godebug=${setting}")
done < <(awk '$1 == "godebug" && $2 ~ /=/ { print $2 }' "$upstream")
for m in "${modules[@]}"; do
  edits+=("-replace=${m}=${m}@${staging}")
done
# Replaces left from an earlier release that no longer has the module.
while read -r old; do
  [[ " ${modules[*]} " == *" ${old} "* ]] || edits+=("-dropreplace=${old}")
done < <(awk '{ sub(/^replace[ \t]+/, "") } $2 == "=>" && $1 ~ /^k8s\.io\// { print $1 }' go.mod)

if [[ $mode == check ]]; then
  cp go.mod "$scratch/go.mod"
  go mod edit "${edits[@]}" "$scratch/go.mod"
  if ! diff -u go.mod "$scratch/go.mod" >&2; then
    echo "pin-kubernetes: tools/go.mod does not match k8s.io/kubernetes@${version}; run tools/pin-kubernetes.sh ${version}" >&2
    exit 1
  fi
  echo "pin-kubernetes: go.mod matches k8s.io/kubernetes@${version} (${#modules[@]} staging modules at ${staging})"
  exit 0
fi

go mod edit "${edits[@]}"
go mod tidy
echo "pin-kubernetes: k8s.io/kubernetes@${version}, ${#modules[@]} staging modules at ${staging}"
