#!/usr/bin/env bash
# Builds ovfwd_<version>_amd64.deb and ovfwd_<version>_amd64.rpm with nfpm.
#
#   packaging/build.sh [outdir]      (default: dist)
#
# Environment: VERSION (default: packaging/version.sh), OVFWD_BIN (the
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
: "${VERSION:=$(packaging/version.sh)}"
# dpkg and rpm both take it as is: it starts with a digit and has no '-'
# (the release separator of both).
case "$VERSION" in
[0-9]*) ;;
*)
	echo "build.sh: VERSION $VERSION does not start with a digit" >&2
	exit 1
	;;
esac
if printf '%s' "$VERSION" | grep -q '[^A-Za-z0-9.+~]'; then
	echo "build.sh: VERSION $VERSION has characters outside [A-Za-z0-9.+~]" >&2
	exit 1
fi
# The package's version is the binary's: refuse a binary built for another.
if ! got=$("$OVFWD_BIN" version) || [ "$got" != "ovfwd $VERSION" ]; then
	echo "build.sh: $OVFWD_BIN says \"$got\", not \"ovfwd $VERSION\"; build it with this VERSION (make build)" >&2
	exit 1
fi
v=$VERSION

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
