#!/usr/bin/env bash
# The arm64 tree heapbpf cross-builds against (make ARCH=arm64): Debian's arm64
# -dev packages of what heapbpf links and their run-time libraries, unpacked
# into DIR with mmdebstrap's extract variant (no emulation, and the host's
# dpkg architectures untouched). The same tree is the root an arm64 guest
# runs heapbpf from (make test-arm64): busybox-static is in it for the
# guest's initramfs. Rebuilt only when the list below or the suite changes.
#
# Usage: scripts/arm64-sysroot.sh DIR [SUITE]
set -euo pipefail

dir=${1:?usage: $0 DIR [SUITE]}
suite=${2:-bookworm}
PKGS=(
	libc6-dev linux-libc-dev
	libbpf-dev libelf-dev libdw-dev libdebuginfod-dev libiberty-dev zlib1g-dev libzstd-dev
	libcurl4-openssl-dev libprotobuf-c-dev
	busybox-static
	libcriterion-dev binutils
)
stamp="$suite ${PKGS[*]}"
if [ -f "$dir/.heapbpf-sysroot" ] && [ "$(cat "$dir/.heapbpf-sysroot")" = "$stamp" ]; then
	touch "$dir/.heapbpf-sysroot" # newer than this script, for make
	exit 0
fi
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
echo "heapbpf: unpacking Debian $suite's arm64 packages into $dir" >&2
inc=$(
	IFS=,
	echo "${PKGS[*]}"
)
mmdebstrap --quiet --variant=extract --architectures=arm64 --include="$inc" \
	"$suite" "$dir" >&2
echo "$stamp" >"$dir/.heapbpf-sysroot"
