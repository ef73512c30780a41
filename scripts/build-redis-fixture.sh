#!/usr/bin/env bash
# Builds redis-server the way upstream builds it, with the jemalloc Redis
# bundles (deps/jemalloc, configured by Redis's deps/Makefile with
# --with-version=5.3.0-0-g0 --with-jemalloc-prefix=je_) and profiling
# compiled in: make MALLOC=jemalloc JEMALLOC_CONFIGURE_OPTS=--enable-prof.
# The source is the upstream tarball of Debian trixie's redis source package
# (redis_8.0.*.orig.tar.gz), fetched by URL from deb.debian.org's pool.
#
# Its SHA-256 is checked against trixie's Sources index, which apt reads
# and verifies against the archive's signed InRelease (a private apt
# configuration under CACHE/apt-trixie, as scripts/fetch-jemalloc-sources.sh
# does for bookworm), and against the package's .dsc when the pool still
# serves it (the .dsc of a superseded upload is removed from the pool while
# its upstream tarball stays).
#
# The result (bin/redis-server and the .dsc-named identity) is kept in
# $HEAPBPF_CACHE (default /var/cache/heapbpf) under a key hashing the
# tarball's checksum, this script and the toolchain; BUILD/fixtures/redis
# links to it. The tests find it as $HEAPBPF_FIXTURES/redis/bin/redis-server.
#
# Usage: scripts/build-redis-fixture.sh [BUILD]
set -euo pipefail

build=${1:-build}
self=$(realpath "$0")
cd "$(dirname "$self")/.."
mkdir -p "$build"
build=$(cd "$build" && pwd)
cache=${HEAPBPF_CACHE-/var/cache/heapbpf}
[ -n "$cache" ] || cache=$build/fixture-cache
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
out=$build/fixtures
pool=http://deb.debian.org/debian/pool/main/r/redis
unset MAKEFLAGS MFLAGS MAKELEVEL
start=$(date +%s)

fail() {
	echo "heapbpf: redis fixture: $*" >&2
	exit 1
}
for tool in apt-get curl sha256sum flock tar make gcc g++; do
	command -v "$tool" >/dev/null || fail "$tool is missing; run make deps"
done
[ "$(id -u)" -eq 0 ] || fail "reading trixie's source index with apt-get needs root"

# ---- what trixie's redis source package is, from the signed index ----------
apt=$cache/apt-trixie
mkdir -p "$apt/sources.list.d" "$apt/lists/partial" "$apt/cache/archives/partial"
cat >"$apt/sources.list.d/debian-src.sources" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
aptopts=(
	-o "Dir::Etc::SourceList=/dev/null"
	-o "Dir::Etc::SourceParts=$apt/sources.list.d"
	-o "Dir::Etc::Preferences=/dev/null"
	-o "Dir::Etc::PreferencesParts=/dev/null"
	-o "Dir::State::Lists=$apt/lists"
	-o "Dir::Cache=$apt/cache"
	-o "APT::Sandbox::User=root"
)
exec 9>"$apt/lock.heapbpf"
flock 9
if ! apt-get "${aptopts[@]}" -qq update; then
	compgen -G "$apt/lists/*Sources*" >/dev/null || fail "cannot read trixie's source index (network?)"
	echo "heapbpf: apt-get update failed; using the trixie source index of $apt" >&2
fi
# 'URI' NAME SIZE SHA256:HEX, one line per file of the source package
uris=$(apt-get "${aptopts[@]}" -qq --print-uris source redis/trixie)
exec 9>&-
orig_line=$(grep -E "redis_8\.0\.[0-9]+\.orig\.tar\.gz" <<<"$uris" | head -1) ||
	fail "trixie's redis source package has no 8.0.x upstream tarball"
dsc_line=$(grep -E "\.dsc'? " <<<"$uris" | head -1) || true
read -r _ orig orig_size orig_sum <<<"$orig_line"
orig_sum=${orig_sum#SHA256:}
[[ "$orig_sum" =~ ^[0-9a-f]{64}$ ]] || fail "apt gave no SHA-256 for $orig"

toolchain() {
	local t
	for t in gcc g++ ld make; do
		"$t" --version | head -1
	done
	uname -m
}
key=$( {
	echo "$orig $orig_sum"
	sha256sum <"$self"
	toolchain
} | sha256sum | cut -c1-16)
set_dir=$cache/redis-$key

if [ ! -f "$set_dir/.complete" ]; then
	exec 8>"$cache/redis-$key.lock"
	flock 8
fi
if [ ! -f "$set_dir/.complete" ]; then
	work=$build/redis-work
	rm -rf "$work"
	mkdir -p "$work"
	echo "heapbpf: fetching $pool/$orig" >&2
	curl -fsS --retry 3 -o "$work/$orig" "$pool/$orig" || fail "cannot download $pool/$orig"
	[ "$(stat -c %s "$work/$orig")" = "$orig_size" ] || fail "$orig has not the size trixie's index says"
	echo "$orig_sum  $work/$orig" | sha256sum -c --quiet - ||
		fail "$orig does not have the SHA-256 trixie's index says"
	if [ -n "$dsc_line" ]; then
		read -r _ dsc _ dsc_sum <<<"$dsc_line"
		dsc_sum=${dsc_sum#SHA256:}
		if curl -fsS -o "$work/$dsc" "$pool/$dsc" 2>/dev/null; then
			echo "$dsc_sum  $work/$dsc" | sha256sum -c --quiet - ||
				fail "$dsc does not have the SHA-256 trixie's index says"
			grep -qE "^ $orig_sum [0-9]+ $orig\$" "$work/$dsc" ||
				fail "$dsc does not list $orig with SHA-256 $orig_sum"
			echo "heapbpf: $orig matches $dsc" >&2
		else
			echo "heapbpf: $pool/$dsc is not served; $orig checked against trixie's signed index only" >&2
		fi
	fi
	tar -xzf "$work/$orig" -C "$work"
	src=$(find "$work" -maxdepth 1 -type d -name 'redis-8.0*' | head -1)
	[ -n "$src" ] || fail "$orig holds no redis-8.0 directory"
	grep -q -- "--with-version=5.3.0-0-g0" "$src/deps/Makefile" ||
		fail "$orig's deps/Makefile does not configure jemalloc as 5.3.0-0-g0"
	# upstream's build, redis-server only (redis-cli and the benchmark are Debian's)
	nice -n 10 make -C "$src/src" -j"$(nproc)" MALLOC=jemalloc \
		JEMALLOC_CONFIGURE_OPTS="--enable-prof --with-lg-vaddr=48" redis-server >"$work/build.log" 2>&1 ||
		{ tail -30 "$work/build.log"; fail "building redis-server failed (log: $work/build.log)"; }
	tmp=$(mktemp -d "$cache/.redis-$key.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp/bin"
	cp -p "$src/src/redis-server" "$tmp/bin/"
	echo "$orig $orig_sum" >"$tmp/source"
	touch "$tmp/.complete"
	chmod 755 "$tmp"
	mv -T "$tmp" "$set_dir"
	trap - EXIT
	rm -rf "$work"
	echo "heapbpf: redis fixture built in $(($(date +%s) - start)) s, kept in $set_dir" >&2
fi
touch "$set_dir"
find "$cache" -maxdepth 1 \( -name 'redis-*' -mtime +30 -o -name '.redis-*' -mtime +1 \) \
	-exec rm -rf {} + 2>/dev/null || true
mkdir -p "$out"
ln -sfn "$set_dir" "$out/redis"
