#!/usr/bin/env bash
# Builds ovfwd_<version>_amd64.deb and ovfwd_<version>_amd64.rpm with nfpm.
#
#   packaging/build.sh [outdir]      (default: dist)
#
# Environment: VERSION (default: git describe, else "dev"), OVFWD_BIN (the
# binary to package, default bin/ovfwd from `make build`), NFPM (the nfpm
# command; default runs the pinned module without touching go.mod).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
outdir=${1:-dist}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)

: "${OVFWD_BIN:=bin/ovfwd}"
if [ ! -x "$OVFWD_BIN" ]; then
	echo "build.sh: $OVFWD_BIN is missing; run \`make build\` first" >&2
	exit 1
fi
: "${VERSION:=$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"

# Both dpkg and rpm want a version that starts with a digit and has no '-'
# (rpm reserves it for the release): v1.2.3 -> 1.2.3, 1.2.3-4-gabc -> 1.2.3.4.gabc,
# abc1234-dirty -> 0.0.0~git.abc1234.dirty ('~' sorts before any release).
v=${VERSION#v}
v=${v//-/.}
v=$(printf '%s' "$v" | tr -c 'A-Za-z0-9.+~' '.')
case "$v" in
[0-9]*) ;;
*) v="0.0.0~git.$v" ;;
esac

# nfpm expands environment variables in version but not in contents, so
# the binary's path is substituted into a private copy of the config.
bin=$(cd "$(dirname "$OVFWD_BIN")" && pwd)/$(basename "$OVFWD_BIN")
cfg=$(mktemp "${TMPDIR:-/tmp}/ovfwd-nfpm.XXXXXX.yaml")
trap 'rm -f "$cfg"' EXIT
sed "s|\${OVFWD_BIN}|$bin|g" packaging/nfpm.yaml >"$cfg"

export OVFWD_VERSION=$v
nfpm=${NFPM:-go run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2}
for format in deb rpm; do
	out="$outdir/ovfwd_${v}_amd64.$format"
	$nfpm package --config "$cfg" --packager "$format" --target "$out" >&2
	echo "$out"
done
