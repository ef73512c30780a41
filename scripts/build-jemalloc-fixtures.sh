#!/usr/bin/env bash
# Makes the jemalloc fixtures the version tests run against, in BUILD/fixtures
# (tests/fixtures/fixtures.mk says what they are).
#
# Building the nine jemallocs takes minutes, so the built set (each build's
# header, archive and shared library) is kept outside the clone, in
# $HEAPBPF_CACHE (default /var/cache/heapbpf; set it empty for
# BUILD/fixture-cache), under a key that hashes everything the set is made
# from: the Debian source packages (the files apt-get source downloads, with
# their SHA-256), fixtures.mk, the 5.2.1 patch, the fetch script and the
# toolchain's versions. While none of them changes, BUILD/fixtures/NAME links
# to the kept set; after a change the set is built again in
# BUILD/fixtures-work (make redoes only what the change touched) and kept
# under its new key. Sets unused for 30 days are removed. The example service
# is linked against the set in BUILD/fixtures/bin every time (seconds).
#
# Usage: scripts/build-jemalloc-fixtures.sh [BUILD]
set -euo pipefail

build=${1:-build}
cd "$(dirname "$0")/.."
mkdir -p "$build"
build=$(cd "$build" && pwd)
cache=${HEAPBPF_CACHE-/var/cache/heapbpf}
[ -n "$cache" ] || cache=$build/fixture-cache
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
out=$build/fixtures
# one job per core of its own, also when make test runs it beside other jobs
unset MAKEFLAGS MFLAGS MAKELEVEL
fxmk=(make --no-print-directory -j"$(nproc)" -f tests/fixtures/fixtures.mk ${V:+V=$V})
start=$(date +%s)

toolchain() {
	local t
	for t in "${CC:-cc}" gcc g++ ld strip make; do
		"$t" --version | head -1
	done
	uname -m
}
key=$( {
	echo "sources:"
	scripts/fetch-jemalloc-sources.sh --identity "$cache/apt"
	# what is built is fixtures.mk's (this script only runs it and keeps the result)
	echo "recipe:"
	sha256sum tests/fixtures/fixtures.mk tests/fixtures/*.patch scripts/fetch-jemalloc-sources.sh
	echo "toolchain:"
	toolchain
} | sha256sum | cut -c1-16)
set_dir=$cache/jemalloc-$key

if [ ! -f "$set_dir/.complete" ]; then
	# another make test building the same set: wait for it, then use its set
	exec 8>"$cache/jemalloc-$key.lock"
	flock 8
fi
if [ ! -f "$set_dir/.complete" ]; then
	work=$build/fixtures-work
	scripts/fetch-jemalloc-sources.sh "$cache/apt" "$work/src"
	# at a lower priority: in make test, the builds and tests that do not need
	# the fixtures (all but versions) go first, the jemallocs use what CPU they leave
	nice -n 10 "${fxmk[@]}" F="$work" jemalloc
	tmp=$(mktemp -d "$cache/.jemalloc-$key.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	"${fxmk[@]}" F="$work" DEST="$tmp" install-jemalloc
	touch "$tmp/.complete"
	chmod 755 "$tmp"
	mv -T "$tmp" "$set_dir"
	trap - EXIT
	echo "heapbpf: jemalloc fixtures built in $(($(date +%s) - start)) s, kept in $set_dir" >&2
fi
touch "$set_dir"
# sets (and their locks) unused for 30 days, and what a killed build left a day ago
find "$cache" -maxdepth 1 \( -name 'jemalloc-*' -mtime +30 -o -name '.jemalloc-*' -mtime +1 \) \
	-exec rm -rf {} + 2>/dev/null || true

# BUILD/fixtures as an older make test left it: the builds themselves were in it
[ ! -e "$out/src" ] || rm -rf "$out"
mkdir -p "$out"
for d in "$set_dir"/*/; do
	name=$(basename "$d")
	[ -L "$out/$name" ] || rm -rf "${out:?}/$name"
	ln -sfn "$set_dir/$name" "$out/$name"
done
echo "$key" | cmp -s - "$out/set" || echo "$key" >"$out/set"
"${fxmk[@]}" OUT="$out"
