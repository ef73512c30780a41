#!/usr/bin/env bash
# The jemalloc arm64 builds of heapbpf link (make ARCH=arm64: the examples):
# Debian's arm64 libjemalloc2 is built without --enable-prof (its rules enable
# profiling on i386 and amd64 only), so it cannot be profiled. This is the same
# bookworm source package (scripts/fetch-jemalloc-sources.sh), configured as
# Debian's rules configure it for arm64 (64 KiB pages: --with-lg-page=16, which
# runs on 4 KiB and 64 KiB kernels alike; 2 MiB huge pages), plus
# --enable-prof; without C++ (the cross compiler has no libstdc++ of its own).
# Installed into BUILD/jemalloc-prof/{include,lib}; built again only when the
# sources' identity, this script or the compiler change.
#
# Usage: scripts/build-jemalloc-arm64.sh BUILD "CC"   (CC: the arm64 compiler,
#        with --sysroot when it cross-compiles)
set -euo pipefail

build=${1:?usage: $0 BUILD CC}
cc=${2:?usage: $0 BUILD CC}
cd "$(dirname "$0")/.."
mkdir -p "$build"
build=$(cd "$build" && pwd)
cache=${HEAPBPF_CACHE-/var/cache/heapbpf}
[ -n "$cache" ] || cache=$build/fixture-cache
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
out=$build/jemalloc-prof
work=$build/jemalloc-prof-work
conf=(--host="$($cc -dumpmachine)" --enable-prof --with-lg-page=16 --with-lg-hugepage=21
	--disable-cxx --disable-doc)
# relative paths in CC (--sysroot=build/...) are taken from the repository
read -r -a ccwords <<<"$cc"
for i in "${!ccwords[@]}"; do
	case ${ccwords[$i]} in --sysroot=/*) ;; --sysroot=*)
		ccwords[i]=--sysroot=$PWD/${ccwords[$i]#--sysroot=}
		;;
	esac
done
key=$( {
	scripts/fetch-jemalloc-sources.sh --identity "$cache/apt"
	sha256sum "$0" scripts/fetch-jemalloc-sources.sh
	echo "${conf[*]}"
	"${ccwords[0]}" --version | head -1
} | sha256sum | cut -c1-16)
if [ -f "$out/.key" ] && [ "$(cat "$out/.key")" = "$key" ]; then
	touch "$out/lib/"*.a # newer than this script, for make
	exit 0
fi
echo "heapbpf: building jemalloc 5.3.0 with profiling for $($cc -dumpmachine)" >&2
scripts/fetch-jemalloc-sources.sh "$cache/apt" "$work/src"
# configured again only for other sources or options; make redoes what changed
if [ ! -f "$work/obj/.key" ] || [ "$(cat "$work/obj/.key")" != "$key" ]; then
	rm -rf "$work/obj"
	mkdir -p "$work/obj"
	(cd "$work/obj" && "$work/src/jemalloc-5.3.0/configure" "${conf[@]}" CC="${ccwords[*]}") \
		>"$work/configure.log" 2>&1 || {
		tail -20 "$work/configure.log" >&2
		exit 1
	}
	echo "$key" >"$work/obj/.key"
fi
unset MAKEFLAGS MFLAGS MAKELEVEL
nice -n 10 make -C "$work/obj" -j"$(nproc)" build_lib >"$work/make.log" 2>&1 || {
	tail -20 "$work/make.log" >&2
	exit 1
}
rm -rf "$out"
mkdir -p "$out/include/jemalloc" "$out/lib"
cp "$work/obj/include/jemalloc/jemalloc.h" "$out/include/jemalloc/"
cp "$work/obj/lib/libjemalloc.a" "$work/obj/lib/libjemalloc_pic.a" "$out/lib/"
cp -d "$work/obj/lib/libjemalloc.so"* "$out/lib/"
echo "$key" >"$out/.key"
