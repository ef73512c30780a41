#!/usr/bin/env bash
# Fetches Debian's arm64 kernel of a suite (the linux-image-*-arm64 package
# the suite's linux-image-arm64 points at) with apt-get download through a
# private apt configuration for arm64 (the host's dpkg architectures are
# not touched), and unpacks it with dpkg-deb -x, never installing it:
#
#   KDIR/apt/SUITE/     sources.list, lists and cache of that suite, arm64
#   KDIR/debs/          the downloaded packages (kept: the cache)
#   KDIR/root/KVER/     the package unpacked (boot/vmlinuz-KVER, modules)
#
# Prints KVER. Lists less than a day old are not updated again.
#
# Usage: tests/arm64/fetch-kernel.sh KDIR [SUITE] (default bookworm)
set -euo pipefail

kdir=${1:?usage: $0 KDIR [SUITE]}
suite=${2:-bookworm}
mkdir -p "$kdir"
kdir=$(cd "$kdir" && pwd)
a=$kdir/apt/$suite
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
opts=(-o "Dir::Etc::SourceList=$a/sources.list" -o "Dir::Etc::SourceParts=$a/sources.list.d"
	-o "Dir::Etc::Preferences=$a/preferences" -o "Dir::Etc::PreferencesParts=$a/preferences.d"
	-o "Dir::State::Lists=$a/lists" -o "Dir::Cache=$a/cache" -o "Dir::State::status=$a/status"
	-o APT::Architecture=arm64 -o APT::Architectures::=arm64
	-o Acquire::Languages=none -o Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false
	-o Debug::NoLocking=1 -o APT::Sandbox::User=root)

mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/sources.list.d" "$a/preferences.d" \
	"$kdir/debs" "$kdir/root"
: >"$a/status"
: >"$a/preferences"
{
	printf 'deb [signed-by=%s] http://deb.debian.org/debian %s main\n' "$keyring" "$suite"
	if [ "$suite" != sid ]; then
		printf 'deb [signed-by=%s] http://deb.debian.org/debian-security %s-security main\n' \
			"$keyring" "$suite"
	fi
} >"$a/sources.list.new"
if cmp -s "$a/sources.list.new" "$a/sources.list"; then
	rm "$a/sources.list.new"
else
	mv "$a/sources.list.new" "$a/sources.list"
fi
if [ -z "$(find "$a" -maxdepth 1 -name updated -newer "$a/sources.list" -mmin -1440 2>/dev/null)" ]; then
	echo "heapbpf: arm64: apt-get update for $suite" >&2
	apt-get "${opts[@]}" -qq update >&2
	touch "$a/updated"
fi

pkg=$(apt-cache "${opts[@]}" depends linux-image-arm64 |
	sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-arm64\)$/\1/p' | head -1)
[ -n "$pkg" ] || {
	echo "heapbpf: arm64: no linux-image-arm64 in $suite" >&2
	exit 1
}
ver=$(apt-cache "${opts[@]}" policy "$pkg" | sed -n 's/^ *Candidate: //p')
kver=${pkg#linux-image-}
root=$kdir/root/$kver
if [ -e "$root/.unpacked" ] && [ "$(cat "$root/.unpacked")" = "$ver" ]; then
	echo "$kver"
	exit 0
fi
# sid splits the image into linux-binary-* and linux-modules-* of the same version
pkgs=("$pkg")
while read -r dep; do
	pkgs+=("$dep")
done < <(apt-cache "${opts[@]}" show "$pkg=$ver" | sed -n 's/^Depends: //p' | head -1 |
	tr ',' '\n' | sed -n 's/^ *\(linux-\(binary\|modules\)-[^ ]*\) (= .*/\1/p')
rm -rf "$root"
mkdir -p "$root"
for p in "${pkgs[@]}"; do
	deb=$kdir/debs/${p}_${ver#*:}_arm64.deb
	if [ ! -s "$deb" ]; then
		echo "heapbpf: arm64: downloading $p $ver ($suite)" >&2
		(cd "$kdir/debs" && apt-get "${opts[@]}" -qq download "$p=$ver" >&2)
	fi
	[ -s "$deb" ] || {
		echo "heapbpf: arm64: $p $ver did not download (no $deb)" >&2
		exit 1
	}
	dpkg-deb -x "$deb" "$root"
done
# the package carries no modules.dep (its postinst makes it)
if [ -d "$root/usr/lib/modules/$kver" ]; then
	depmod -b "$root/usr" "$kver"
else
	depmod -b "$root" "$kver"
fi
echo "$ver" >"$root/.unpacked"
echo "$kver"
