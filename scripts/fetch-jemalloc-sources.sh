#!/usr/bin/env bash
# Fetches the jemalloc sources the test fixtures are built from, from Debian
# source packages, into DIR/src:
#
#   jemalloc-5.3.0   bookworm's jemalloc source package
#   jemalloc-5.2.1   deps/jemalloc of bookworm's redis source package: upstream
#                    5.2.1 plus Redis's additive defrag-hint function (bullseye's
#                    jemalloc 5.2.1 source files are not served by the archive
#                    mirror CI reaches; its binaries are)
#
# apt runs with a private configuration under DIR/apt (its own deb-src list,
# package lists and cache), so the machine's apt setup is left as it was.
# Idempotent: does nothing when both trees are already there.
#
# Usage: scripts/fetch-jemalloc-sources.sh DIR
set -euo pipefail

dir=${1:?usage: $0 DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
src=$dir/src
stamp=$src/.fetched

if [ -f "$stamp" ]; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "heapbpf: fetching jemalloc sources with apt-get needs root" >&2
	exit 1
fi
for tool in apt-get dpkg-source; do
	if ! command -v "$tool" >/dev/null; then
		echo "heapbpf: $tool is missing; run make deps" >&2
		exit 1
	fi
done

apt=$dir/apt
mkdir -p "$apt/sources.list.d" "$apt/preferences.d" "$apt/lists/partial" \
	"$apt/cache/archives/partial"
cat >"$apt/sources.list.d/debian-src.sources" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
aptopts=(
	-o "Dir::Etc::SourceList=/dev/null"
	-o "Dir::Etc::SourceParts=$apt/sources.list.d"
	-o "Dir::Etc::Preferences=/dev/null"
	-o "Dir::Etc::PreferencesParts=$apt/preferences.d"
	-o "Dir::State::Lists=$apt/lists"
	-o "Dir::Cache=$apt/cache"
	-o "APT::Sandbox::User=root"
)

echo "heapbpf: fetching jemalloc sources (Debian source packages jemalloc, redis)" >&2
apt-get "${aptopts[@]}" -qq update
dl=$dir/download
rm -rf "$dl" "$src"
mkdir -p "$dl" "$src"
(cd "$dl" && apt-get "${aptopts[@]}" -qq source jemalloc/bookworm redis/bookworm >/dev/null)

# check what we got before building anything from it
version_of() {
	head -c 64 "$1/VERSION"
}
je530=$(find "$dl" -maxdepth 1 -type d -name 'jemalloc-5.3.0*' | head -1)
redis=$(find "$dl" -maxdepth 1 -type d -name 'redis-*' | head -1)
if [ -z "$je530" ] || [[ "$(version_of "$je530")" != 5.3.0-* ]]; then
	echo "heapbpf: bookworm's jemalloc source is not 5.3.0" >&2
	exit 1
fi
if [ -z "$redis" ] || [[ "$(version_of "$redis/deps/jemalloc")" != 5.2.1-* ]]; then
	echo "heapbpf: bookworm's redis source does not carry jemalloc 5.2.1" >&2
	exit 1
fi
mv "$je530" "$src/jemalloc-5.3.0"
mv "$redis/deps/jemalloc" "$src/jemalloc-5.2.1"
rm -rf "$dl"
touch "$stamp"
