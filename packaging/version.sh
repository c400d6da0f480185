#!/bin/sh
# Prints the package and binary version of the source tree in $1 (default:
# the repository this script is in), from its release tags (v0.x.y):
#
#   on a tag v0.3.1                 0.3.1
#   5 commits past v0.3.1           0.3.2~git5.1a2b3c4d5e6f
#   no release tag in the history   0.0.0~git<commits>.1a2b3c4d5e6f
#   uncommitted changes             the above + ".dirty"
#
# '~' sorts before anything in dpkg and rpm (deb-version(7), rpm's
# rpmvercmp), so a build between two tags sorts after the first and before
# the second, and builds on one branch sort by their commit count.
set -eu
dir=${1:-$(dirname "$0")/..}
cd "$dir"

hash=$(git rev-parse --short=12 HEAD 2>/dev/null) || {
	echo "0.0.0~nogit"
	exit 0
}
dirty=
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	dirty=.dirty
fi

if desc=$(git describe --tags --long --match 'v[0-9]*.[0-9]*.[0-9]*' --abbrev=12 2>/dev/null); then
	# v0.3.1-5-g1a2b3c4d5e6f
	tag=${desc%-*-g*}
	rest=${desc#"$tag"-}
	n=${rest%%-*}
	v=${tag#v}
	case "$v" in
	*[!0-9.]* | *..* | .* | *.)
		echo "version.sh: tag $tag is not vMAJOR.MINOR.PATCH" >&2
		exit 1
		;;
	esac
	if [ "$n" = 0 ]; then
		echo "$v$dirty"
		exit 0
	fi
	major=${v%%.*}
	minor=${v#*.}
	minor=${minor%%.*}
	patch=${v##*.}
	echo "$major.$minor.$((patch + 1))~git$n.$hash$dirty"
	exit 0
fi
n=$(git rev-list --count HEAD)
echo "0.0.0~git$n.$hash$dirty"
