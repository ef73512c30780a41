#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# vmlinux/gen-vmlinux-h.sh for a kernel that is not running here and whose
# image is not ELF: arm64's, from Debian's linux-image-*-arm64 package (the
# .deb, or its /boot/vmlinuz-* unpacked), gzip-compressed Image with its
# .BTF inside (vmlinux/btf-from-image.py finds it by its magic, 0xeB9F):
#
#   vmlinux/gen-vmlinux-h-image.sh linux-image-6.1.0-57-arm64_6.1.192-3_arm64.deb arm64 \
#       > vmlinux/arm64/vmlinux.h
set -eu

img=${1:?usage: $0 DEB-OR-VMLINUZ ARCH}
arch=${2:?usage: $0 DEB-OR-VMLINUZ ARCH}
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case $img in
*.deb)
	dpkg-deb --fsys-tarfile "$img" | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*'
	vmlinuz=$(ls "$tmp"/boot/vmlinuz-*)
	;;
*) vmlinuz=$img ;;
esac
"$here/btf-from-image.py" "$vmlinuz" "$tmp/btf"
"$here/gen-vmlinux-h.sh" "$tmp/btf" "$arch" |
	sed "1s|from $tmp/btf;|from the BTF in $(basename "$img");|"
