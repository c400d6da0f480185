#!/usr/bin/env bash
# Builds ovfwd_<version>_<arch>.deb and ovfwd_<version>_<arch>.rpm with nfpm,
# <arch> the binary's GOARCH (amd64 or arm64).
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
# The package's architecture is the one the binary was built for, so an
# amd64 binary can never ship in an arm64 package. An arm64 binary runs
# here under qemu-aarch64 (user-mode emulation) and is stripped by the
# aarch64 binutils.
arch=$(go version -m "$OVFWD_BIN" | sed -n 's/^[[:space:]]*build[[:space:]]*GOARCH=//p')
exec=() strip=strip
case "$arch" in
amd64) ;;
arm64)
	if [ "$(uname -m)" != aarch64 ]; then
		exec=(qemu-aarch64-static) strip=aarch64-linux-gnu-strip
	fi
	;;
*)
	echo "build.sh: $OVFWD_BIN is built for GOARCH '$arch'; packages are made for amd64 and arm64" >&2
	exit 1
	;;
esac
# The package's version is the binary's: refuse a binary built for another.
if ! got=$("${exec[@]}" "$OVFWD_BIN" version) || [ "$got" != "ovfwd $VERSION" ]; then
	echo "build.sh: $OVFWD_BIN says \"$got\", not \"ovfwd $VERSION\"; build it with this VERSION (make build)" >&2
	exit 1
fi
v=$VERSION

# nfpm expands environment variables in version but not in contents, so
# the paths of the binary and of the files made here (compressed man pages,
# changelog, copyright) are substituted into a private copy of the config.
bin=$(cd "$(dirname "$OVFWD_BIN")" && pwd)/$(basename "$OVFWD_BIN")
work=$(mktemp -d "${TMPDIR:-/tmp}/ovfwd-nfpm.XXXXXX")
trap 'rm -rf "$work"' EXIT
for page in packaging/man/*.[0-9]; do
	gzip -9n -c "$page" >"$work/$(basename "$page").gz"
done

# Packaged stripped (the Go runtime's own tables keep stack traces whole).
cp "$bin" "$work/ovfwd"
"$strip" --strip-unneeded "$work/ovfwd"
bin=$work/ovfwd

# changelog.Debian (the version's one entry, dated by its commit) and a
# copyright file naming the Go modules linked into the binary with their
# licences, from the module cache.
when=$(git log -1 --format=%cD 2>/dev/null || date -R)
{
	printf 'ovfwd (%s-1) unstable; urgency=medium\n\n' "$v"
	printf '  * Built from %s.\n\n' "$(git rev-parse --short=12 HEAD 2>/dev/null || echo 'a tree without git')"
	printf ' -- ovfwd team <ovfwd@example.invalid>  %s\n' "$when"
} | gzip -9n >"$work/changelog.Debian.gz"
modcache=$(go env GOMODCACHE)
{
	cat packaging/copyright
	go version -m "$bin" | awk '$1 == "dep" {print $2, $3}' | while read -r mod ver; do
		# The module cache escapes capitals as '!' + lower case.
		dir=$modcache/$(printf '%s' "$mod" | sed 's/[A-Z]/!\L&/g')@$ver
		lic=
		for f in "$dir"/LICENSE* "$dir"/LICENCE* "$dir"/COPYING*; do
			if [ -f "$f" ]; then
				lic=$f
				break
			fi
		done
		if [ -z "$lic" ]; then
			echo "build.sh: no licence file for $mod $ver in $dir" >&2
			exit 1
		fi
		printf '\nLinked Go module: %s %s\n' "$mod" "$ver"
		if grep -q 'Apache License' "$lic" && grep -q 'Version 2.0' "$lic"; then
			# Debian ships this one text (Debian policy 12.5).
			printf ' Apache License 2.0: /usr/share/common-licenses/Apache-2.0\n'
		else
			sed -e 's/^$/./' -e 's/^/ /' "$lic"
		fi
	done
} >"$work/copyright"

sed -e "s|\${OVFWD_BIN}|$bin|g" -e "s|\${OVFWD_WORK}|$work|g" packaging/nfpm.yaml >"$work/nfpm.yaml"
cfg=$work/nfpm.yaml

export OVFWD_VERSION=$v OVFWD_ARCH=$arch
nfpm=${NFPM:-go run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2}
for format in deb rpm; do
	out="$outdir/ovfwd_${v}_${arch}.$format"
	$nfpm package --config "$cfg" --packager "$format" --target "$out" >&2
	echo "$out"
done
