#!/usr/bin/env bash
# The jemalloc sources the test fixtures are built from, from Debian source
# packages:
#
#   jemalloc-5.3.0   bookworm's jemalloc source package
#   jemalloc-5.2.1   deps/jemalloc of bookworm's redis source package: upstream
#                    5.2.1 plus Redis's additive defrag-hint function (bullseye's
#                    jemalloc 5.2.1 source files are not served by the archive
#                    mirror CI reaches; its binaries are)
#
# apt runs with a private configuration under APTDIR (its own deb-src list,
# package lists and cache), so the machine's apt setup is left as it was.
#
#   --identity APTDIR   refreshes APTDIR's package lists and prints what
#                       `apt-get source` would download (file names, sizes,
#                       SHA-256): the identity of the sources, for cache keys
#   APTDIR DEST         fetches and unpacks them into DEST/jemalloc-5.3.0 and
#                       DEST/jemalloc-5.2.1; does nothing when DEST already
#                       holds the sources of that identity
set -euo pipefail

identity_only=0
if [ "${1:-}" = --identity ]; then
	identity_only=1
	shift
fi
apt=${1:?usage: $0 [--identity] APTDIR [DEST]}
if [ $identity_only = 0 ]; then
	dest=${2:?usage: $0 APTDIR DEST}
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "heapbpf: fetching jemalloc sources with apt-get needs root" >&2
	exit 1
fi
for tool in apt-get dpkg-source flock; do
	if ! command -v "$tool" >/dev/null; then
		echo "heapbpf: $tool is missing; run make deps" >&2
		exit 1
	fi
done

mkdir -p "$apt/sources.list.d" "$apt/preferences.d" "$apt/lists/partial" \
	"$apt/cache/archives/partial"
apt=$(cd "$apt" && pwd)
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
pkgs=(jemalloc/bookworm redis/bookworm)

# one apt at a time on these lists (two make test runs may share APTDIR)
exec 9>"$apt/lock.heapbpf"
flock 9

# The lists are kept: a refresh downloads only what changed (nothing, most
# days). Without a network the lists of the last refresh still name the
# sources exactly. Fetching uses the lists the identity was read from.
have_lists() {
	compgen -G "$apt/lists/*Sources*" >/dev/null
}
if [ $identity_only = 1 ] || ! have_lists; then
	if ! apt-get "${aptopts[@]}" -qq update; then
		if ! have_lists; then
			echo "heapbpf: cannot read bookworm's source package lists (network?)" >&2
			exit 1
		fi
		echo "heapbpf: apt-get update failed; using the source package lists of $apt" >&2
	fi
fi
identity=$(apt-get "${aptopts[@]}" -qq --print-uris source "${pkgs[@]}" | awk '{print $2, $3, $4}')
if [ -z "$identity" ]; then
	echo "heapbpf: apt-get finds no source package for ${pkgs[*]}" >&2
	exit 1
fi
if [ $identity_only = 1 ]; then
	echo "$identity"
	exit 0
fi

mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
stamp=$dest/.fetched
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$identity" ]; then
	exit 0
fi

echo "heapbpf: fetching jemalloc sources (Debian source packages jemalloc, redis)" >&2
dl=$dest/download
rm -rf "$dl" "$dest/jemalloc-5.3.0" "$dest/jemalloc-5.2.1" "$stamp"
mkdir -p "$dl"
(cd "$dl" && apt-get "${aptopts[@]}" -qq source "${pkgs[@]}" >/dev/null)

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
mv "$je530" "$dest/jemalloc-5.3.0"
mv "$redis/deps/jemalloc" "$dest/jemalloc-5.2.1"
rm -rf "$dl"
echo "$identity" >"$stamp"
