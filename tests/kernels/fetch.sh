#!/usr/bin/env bash
# Fetches the kernel of each suite in the matrix (Debian's linux-image-*-amd64
# package that suite's linux-image-amd64 points at) with apt-get download,
# never installing it, and unpacks it with dpkg-deb -x:
#
#   build/kernels/apt/SUITE/   a private apt configuration per suite: its own
#                              sources.list, lists and cache (the host's
#                              /etc/apt is only read for apt's defaults)
#   build/kernels/debs/        the downloaded packages (kept: the cache)
#   build/kernels/root/NAME/   each package unpacked (boot/vmlinuz-*, modules)
#   build/kernels/matrix       one line per kernel: NAME SUITE VERSION PACKAGE
#
# A suite whose lists are less than a day old is not updated again; a
# package already downloaded and unpacked is kept.
#
# Usage: tests/kernels/fetch.sh [KDIR] (default build/kernels)
set -euo pipefail

kdir=${1:-build/kernels}
mkdir -p "$kdir"
kdir=$(cd "$kdir" && pwd)
# NAME SUITES (the first one names it; the others are its updates)
MATRIX=(
	"bullseye bullseye bullseye-security"
	"bookworm bookworm bookworm-security"
	"trixie trixie trixie-security"
	"sid sid"
)
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

apt_opts() {
	local a=$kdir/apt/$1
	printf '%s\n' -o "Dir::Etc::SourceList=$a/sources.list" \
		-o "Dir::Etc::SourceParts=$a/sources.list.d" \
		-o "Dir::Etc::Preferences=$a/preferences" \
		-o "Dir::Etc::PreferencesParts=$a/preferences.d" \
		-o "Dir::State::Lists=$a/lists" -o "Dir::Cache=$a/cache" \
		-o "Dir::State::status=$a/status" \
		-o APT::Architecture=amd64 -o APT::Architectures::=amd64 \
		-o Acquire::Languages=none -o Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false \
		-o Debug::NoLocking=1 -o APT::Sandbox::User=root
}

setup_suite() {
	local name=$1 a=$kdir/apt/$1 s uri
	shift
	mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/sources.list.d" "$a/preferences.d"
	: >"$a/status"
	: >"$a/preferences"
	{
		for s in "$@"; do
			uri=http://deb.debian.org/debian
			[[ $s == *-security ]] && uri=http://deb.debian.org/debian-security
			echo "deb [signed-by=$keyring] $uri $s main"
		done
	} >"$a/sources.list.new"
	if ! cmp -s "$a/sources.list.new" "$a/sources.list"; then
		mv "$a/sources.list.new" "$a/sources.list"
		rm -f "$a/updated"
	else
		rm -f "$a/sources.list.new"
	fi
	if [ -z "$(find "$a" -maxdepth 1 -name updated -mmin -1440 2>/dev/null)" ]; then
		echo "heapbpf: kernels: apt-get update for $name" >&2
		local opts
		mapfile -t opts < <(apt_opts "$name")
		apt-get "${opts[@]}" -qq update >&2
		touch "$a/updated"
	fi
}

# The versioned image package the suite's linux-image-amd64 depends on (the
# newest linux-image-amd64 of the suite and its updates).
image_package() {
	local opts
	mapfile -t opts < <(apt_opts "$1")
	apt-cache "${opts[@]}" depends linux-image-amd64 |
		sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -1
}

matrix_new=$kdir/matrix.new
: >"$matrix_new"
mkdir -p "$kdir/debs" "$kdir/root"
for entry in "${MATRIX[@]}"; do
	read -r -a suites <<<"$entry"
	name=${suites[0]}
	setup_suite "$name" "${suites[@]:1}"
	pkg=$(image_package "$name")
	if [ -z "$pkg" ]; then
		echo "heapbpf: kernels: no linux-image-amd64 in $name" >&2
		exit 1
	fi
	mapfile -t opts < <(apt_opts "$name")
	ver=$(apt-cache "${opts[@]}" policy "$pkg" | sed -n 's/^ *Candidate: //p')
	# sid splits the image into linux-binary-* (vmlinuz) and linux-modules-*
	# packages of the same version, which the image package depends on
	pkgs=("$pkg")
	while read -r dep; do
		pkgs+=("$dep")
	done < <(apt-cache "${opts[@]}" show "$pkg=$ver" | sed -n 's/^Depends: //p' | head -1 |
		tr ',' '\n' | sed -n 's/^ *\(linux-\(binary\|modules\)-[^ ]*\) (= .*/\1/p')
	root=$kdir/root/${pkg#linux-image-}
	if [ -e "$root/.unpacked" ] && [ "$(cat "$root/.unpacked")" = "$ver with modules.dep" ]; then
		echo "${pkg#linux-image-} $name $ver $pkg" >>"$matrix_new"
		continue
	fi
	rm -rf "$root"
	mkdir -p "$root"
	for p in "${pkgs[@]}"; do
		deb=$kdir/debs/${p}_${ver#*:}_amd64.deb
		if [ ! -s "$deb" ]; then
			echo "heapbpf: kernels: downloading $p $ver ($name)" >&2
			(cd "$kdir/debs" && apt-get "${opts[@]}" -qq download "$p=$ver" >&2)
		fi
		[ -s "$deb" ] || {
			echo "heapbpf: kernels: $p $ver did not download (no $deb)" >&2
			exit 1
		}
		dpkg-deb -x "$deb" "$root"
	done
	# the packages carry no modules.dep (their postinst makes it): make it here
	kver=${pkg#linux-image-}
	if [ -d "$root/usr/lib/modules/$kver" ]; then
		depmod -b "$root/usr" "$kver"
	else
		depmod -b "$root" "$kver"
	fi
	echo "$ver with modules.dep" >"$root/.unpacked"
	echo "${pkg#linux-image-} $name $ver $pkg" >>"$matrix_new"
done
mv "$matrix_new" "$kdir/matrix"
cat "$kdir/matrix"
