#!/usr/bin/env bash
# The jemalloc 5.3.1 sources the 5.3.1 test fixtures are built from
# (tests/fixtures/fixtures-531.mk): Debian unstable's (sid) jemalloc source
# package, kept apart from the 5.3.0/5.2.1 sources
# (scripts/fetch-jemalloc-sources.sh) so that neither set's cache key moves
# with the other's.
#
# apt runs with a private configuration under APTDIR (its own deb-src list,
# package lists and cache), so the machine's apt setup is left as it was.
#
#   --identity APTDIR   refreshes APTDIR's package lists and prints what
#                       `apt-get source` would download (file names, sizes,
#                       SHA-256): the identity of the sources, for cache keys
#   APTDIR DEST         fetches and unpacks them into DEST/jemalloc-5.3.1;
#                       does nothing when DEST already holds the sources of
#                       that identity
set -euo pipefail

identity_only=0
if [ "${1:-}" = --identity ]; then
	identity_only=1
	shift
fi
apt=${1:?usage: $0 [--identity] APTDIR [DEST]}
if [ $identity_only = 0 ]; then
	dest=${2:?usage: $0 APTDIR DEST}
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "heapbpf: fetching jemalloc sources with apt-get needs root" >&2
	exit 1
fi
for tool in apt-get dpkg-source flock; do
	if ! command -v "$tool" >/dev/null; then
		echo "heapbpf: $tool is missing; run make deps" >&2
		exit 1
	fi
done

mkdir -p "$apt/sources.list.d" "$apt/preferences.d" "$apt/lists/partial" \
	"$apt/cache/archives/partial"
apt=$(cd "$apt" && pwd)
cat >"$apt/sources.list.d/debian-src.sources" <<'SOURCES'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
aptopts=(
	-o "Dir::Etc::SourceList=/dev/null"
	-o "Dir::Etc::SourceParts=$apt/sources.list.d"
	-o "Dir::Etc::Preferences=/dev/null"
	-o "Dir::Etc::PreferencesParts=$apt/preferences.d"
	-o "Dir::State::Lists=$apt/lists"
	-o "Dir::Cache=$apt/cache"
	-o "APT::Sandbox::User=root"
)
# the version, not only the suite: sid moves, the fixtures are of 5.3.1
pkg=jemalloc/sid

exec 9>"$apt/lock.heapbpf"
flock 9

have_lists() {
	compgen -G "$apt/lists/*Sources*" >/dev/null
}
if [ $identity_only = 1 ] || ! have_lists; then
	if ! apt-get "${aptopts[@]}" -qq update; then
		if ! have_lists; then
			echo "heapbpf: cannot read sid's source package lists (network?)" >&2
			exit 1
		fi
		echo "heapbpf: apt-get update failed; using the source package lists of $apt" >&2
	fi
fi
identity=$(apt-get "${aptopts[@]}" -qq --print-uris source "$pkg" | awk '{print $2, $3, $4}')
if [ -z "$identity" ]; then
	echo "heapbpf: apt-get finds no source package for $pkg" >&2
	exit 1
fi
if [ $identity_only = 1 ]; then
	echo "$identity"
	exit 0
fi

mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
stamp=$dest/.fetched
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$identity" ]; then
	exit 0
fi

echo "heapbpf: fetching jemalloc 5.3.1 sources (Debian source package jemalloc, sid)" >&2
dl=$dest/download
rm -rf "$dl" "$dest/jemalloc-5.3.1" "$stamp"
mkdir -p "$dl"
(cd "$dl" && apt-get "${aptopts[@]}" -qq source "$pkg" >/dev/null)

# a git snapshot: no VERSION file (fixtures-531.mk gives the version
# configure records), no configure (fixtures-531.mk runs autoconf, as
# Debian's build does); the ChangeLog's newest release says what it is
je531=$(find "$dl" -maxdepth 1 -type d -name 'jemalloc-5.3.1*' | head -1)
if [ -z "$je531" ] || [ ! -f "$je531/configure.ac" ] ||
	[ "$(grep -m1 '^\* [0-9]' "$je531/ChangeLog" | cut -d' ' -f2)" != 5.3.1 ]; then
	echo "heapbpf: sid's jemalloc source is not 5.3.1 (sid moved on: update" \
		"scripts/fetch-jemalloc-531-sources.sh)" >&2
	exit 1
fi
mv "$je531" "$dest/jemalloc-5.3.1"
rm -rf "$dl"
echo "$identity" >"$stamp"
