#!/usr/bin/env bash
# Makes the jemalloc fixtures the version tests run against, in BUILD/fixtures:
# two sets, each with its own cache key, lock and recipe:
#   jemalloc-KEY     5.3.0 and 5.2.1 (tests/fixtures/fixtures.mk)
#   jemalloc531-KEY  5.3.1 (tests/fixtures/fixtures-531.mk, from sid's source
#                    package; its key hashes only its own inputs, so the other
#                    set's key is the same with or without it)
#
# Building the jemallocs takes minutes, so the built set (each build's
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
fxmk=(make --no-print-directory -j"$(nproc)" ${V:+V=$V})

toolchain() {
	local t
	for t in "${CC:-cc}" gcc g++ ld strip make; do
		"$t" --version | head -1
	done
	uname -m
}
# the set's key: what it is made from (its sources' identity, its recipe, the toolchain)
key=$( {
	echo "sources:"
	scripts/fetch-jemalloc-sources.sh --identity "$cache/apt"
	# what is built is fixtures.mk's (this script only runs it and keeps the result)
	echo "recipe:"
	sha256sum tests/fixtures/fixtures.mk tests/fixtures/*.patch scripts/fetch-jemalloc-sources.sh
	echo "toolchain:"
	toolchain
} | sha256sum | cut -c1-16)
# The 5.3.1 set (tests/fixtures/fixtures-531.mk) is a set of its own: its key
# hashes only its own inputs (sid's jemalloc source package, its recipe, the
# toolchain with the autoconf that generates its configure), so neither set is
# rebuilt when the other changes.
if ! command -v autoconf >/dev/null; then
	echo "heapbpf: autoconf is missing (the 5.3.1 fixtures need it); run make deps" >&2
	exit 1
fi
key531=$( {
	echo "sources:"
	scripts/fetch-jemalloc-531-sources.sh --identity "$cache/apt-sid"
	echo "recipe:"
	sha256sum tests/fixtures/fixtures-531.mk scripts/fetch-jemalloc-531-sources.sh
	echo "toolchain:"
	toolchain
	autoconf --version | head -1
} | sha256sum | cut -c1-16)

# make_set NAME KEY FETCH APTDIR MK: builds the set NAME-KEY in $cache (its
# sources fetched by FETCH into APTDIR, its jemallocs built by MK) unless it
# is there; made_dir is its directory
made_dir=
make_set() {
	local name=$1 key=$2 fetch=$3 aptdir=$4 mk=$5 set_dir work t0
	set_dir=$cache/$name-$key
	t0=$(date +%s)
	if [ ! -f "$set_dir/.complete" ]; then
		# another make test building the same set: wait for it, then use its set
		exec 8>"$cache/$name-$key.lock"
		flock 8
	fi
	if [ ! -f "$set_dir/.complete" ]; then
		work=$build/fixtures-work
		[ "$name" = jemalloc ] || work=$build/fixtures-work-$name
		"$fetch" "$aptdir" "$work/src"
		# at a lower priority: in make test, the builds and tests that do not need
		# the fixtures (all but versions) go first, the jemallocs use what CPU they leave
		nice -n 10 "${fxmk[@]}" -f "$mk" F="$work" jemalloc
		tmp=$(mktemp -d "$cache/.$name-$key.XXXXXX")
		trap 'rm -rf "$tmp"' EXIT
		"${fxmk[@]}" -f "$mk" F="$work" DEST="$tmp" install-jemalloc
		touch "$tmp/.complete"
		chmod 755 "$tmp"
		mv -T "$tmp" "$set_dir"
		trap - EXIT
		echo "heapbpf: $name fixtures built in $(($(date +%s) - t0)) s, kept in $set_dir" >&2
	fi
	exec 8>&-
	touch "$set_dir"
	made_dir=$set_dir
}
make_set jemalloc "$key" scripts/fetch-jemalloc-sources.sh "$cache/apt" tests/fixtures/fixtures.mk
set_dir=$made_dir
make_set jemalloc531 "$key531" scripts/fetch-jemalloc-531-sources.sh "$cache/apt-sid" \
	tests/fixtures/fixtures-531.mk
set531_dir=$made_dir
# sets (and their locks) unused for 30 days, and what a killed build left a day ago
find "$cache" -maxdepth 1 \( \( -name 'jemalloc-*' -o -name 'jemalloc531-*' \) -mtime +30 \
	-o -name '.jemalloc-*' -mtime +1 -o -name '.jemalloc531-*' -mtime +1 \) \
	-exec rm -rf {} + 2>/dev/null || true

# BUILD/fixtures as an older make test left it: the builds themselves were in it
[ ! -e "$out/src" ] || rm -rf "$out"
mkdir -p "$out"
for d in "$set_dir"/*/ "$set531_dir"/*/; do
	name=$(basename "$d")
	[ -L "$out/$name" ] || rm -rf "${out:?}/$name"
	ln -sfn "${d%/}" "$out/$name"
done
echo "$key" | cmp -s - "$out/set" || echo "$key" >"$out/set"
echo "$key531" | cmp -s - "$out/set-531" || echo "$key531" >"$out/set-531"
"${fxmk[@]}" -f tests/fixtures/fixtures.mk OUT="$out"
"${fxmk[@]}" -f tests/fixtures/fixtures-531.mk OUT="$out"
