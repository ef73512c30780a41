#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Writes the BTF of a kernel image that is not ELF (arm64's Image, as
Debian's linux-image-*-arm64 ships it gzip-compressed in /boot/vmlinuz-*)
to a file that bpftool reads:

    vmlinux/btf-from-image.py /boot/vmlinuz-6.1.0-57-arm64 /tmp/btf
    vmlinux/gen-vmlinux-h.sh /tmp/btf > vmlinux/arm64/vmlinux.h

The kernel links its .BTF section into the image as it is: a header with
the magic 0xeB9F (bytes 9f eb, little-endian), version 1, then the type and
string sections whose offsets and lengths the header gives. The image is
searched for that magic; a candidate counts only if its header is
consistent (sections inside the image, types first, strings right after
them, the string section starting with the empty string), and the largest
one is taken: vmlinux's BTF, not a stray match.
"""
import gzip
import struct
import sys

MAGIC = b"\x9f\xeb\x01"  # 0xeB9F little-endian, version 1
HDR = struct.Struct("<HBBIIIII")  # magic, version, flags, hdr_len, type_off/len, str_off/len


def candidates(img):
    pos = img.find(MAGIC)
    while pos >= 0:
        if pos + HDR.size <= len(img):
            _, _, flags, hdr_len, type_off, type_len, str_off, str_len = HDR.unpack_from(img, pos)
            end = pos + hdr_len + str_off + str_len
            if (flags == 0 and hdr_len == HDR.size and type_off == 0 and type_len > 0
                    and str_off == type_len and str_len > 0 and end <= len(img)
                    and img[pos + hdr_len + str_off] == 0):
                yield pos, end
        pos = img.find(MAGIC, pos + 1)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: btf-from-image.py IMAGE OUT")
    with open(sys.argv[1], "rb") as f:
        img = f.read()
    if img[:2] == b"\x1f\x8b":
        img = gzip.decompress(img)
    found = sorted(candidates(img), key=lambda c: c[1] - c[0], reverse=True)
    if not found:
        sys.exit(f"btf-from-image.py: no BTF in {sys.argv[1]} (a kernel built without CONFIG_DEBUG_INFO_BTF?)")
    start, end = found[0]
    with open(sys.argv[2], "wb") as f:
        f.write(img[start:end])
    print(f"btf-from-image.py: {end - start} bytes of BTF at offset {start:#x}", file=sys.stderr)


if __name__ == "__main__":
    main()
