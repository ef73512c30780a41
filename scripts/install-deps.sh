#!/usr/bin/env bash
# Installs the Debian packages heapbpf needs to build, run its demo and its tests.
# Idempotent: only packages that are missing are installed. Must run as root.
set -euo pipefail

PKGS=(
	make gcc clang llvm clang-format clang-tidy cppcheck pkg-config binutils gzip
	libbpf-dev bpftool linux-libc-dev
	libelf-dev libdw-dev libdebuginfod1 libdebuginfod-dev libiberty-dev zlib1g-dev libzstd-dev libcurl4-openssl-dev
	libprotobuf-c-dev protobuf-c-compiler protobuf-compiler golang-github-google-pprof-dev
	libjemalloc-dev libjemalloc2 libcriterion-dev
	debuginfod redis-server redis-tools curl libclang-rt-14-dev
	python3 bpftrace nghttp2-server nghttp2-client # bench/ (make bench, and its smoke run in make test; bench/services.py: nghttpd, h2load)
	tmux # tests/integration/test_top.c: heapbpf top on a terminal (send-keys, capture-pane)
	systemd strace util-linux openssl # tests/integration/test_fleet.c: systemd-analyze, strace, setpriv, a test certificate (python3: its Pyroscope stand-in)
	python3-protobuf # tests/pyroscope/pyroscope_push_server.py: decodes push requests with proto/ (protoc: its descriptors)
	python3-yaml # tests/kubernetes/check_manifest.py: parses examples/kubernetes/heapbpf-agent.yaml
	chromium # tests/integration/test_flamegraph.c: the flame graph page in a headless browser
	man-db groff-base bsdextrautils # tests/integration/test_install.c: man -l renders man/heapbpf.8 (col -bx)
	gdb # tests/integration/test_core.c: gcore writes the core files heapbpf report reads
	dwz # tests/unit/test_debugsearch.c: a dwz multifile, as Debian's debug packages carry
	# jemalloc test fixtures: apt-get source, unpack, patch, build (g++: jemalloc's C++ part;
	# autoconf: sid's 5.3.1 source package is a git snapshot without configure)
	dpkg-dev debian-archive-keyring bzip2 xz-utils patch g++ autoconf
	qemu-system-x86 busybox-static kmod # tests/kernels/: Debian's kernels booted under qemu (make test-kernels; kmod: depmod)
	gcc-aarch64-linux-gnu mmdebstrap qemu-system-arm # arm64: the cross build (make ARCH=arm64) against an arm64 tree
	# (mmdebstrap --variant=extract), booted under qemu-system-aarch64 (make test-arm64)
)

missing=()
for p in "${PKGS[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done

# tests/kubernetes/validate.mjs: the Kubernetes API's schema, from the npm registry
# (kubernetes-models, @kubernetes/client-node; versions in its package-lock.json),
# with the machine's Node.js and npm; Debian's npm would replace that Node.js.
npm_deps() {
	local dir
	dir="$(dirname "$0")/../tests/kubernetes"
	[ -d "$dir/node_modules/kubernetes-models" ] && [ -d "$dir/node_modules/@kubernetes/client-node" ] &&
		return 0
	if ! command -v npm >/dev/null; then
		echo "heapbpf: npm is missing (Node.js and npm validate the Kubernetes manifest's schema)" >&2
		return 1
	fi
	echo "heapbpf: installing tests/kubernetes' npm packages" >&2
	(cd "$dir" && npm ci --no-audit --no-fund --silent) >&2
}

if [ ${#missing[@]} -eq 0 ]; then
	npm_deps
	exit
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "heapbpf: missing packages: ${missing[*]}; run as root (or: sudo apt-get install ${missing[*]})" >&2
	exit 1
fi

echo "heapbpf: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
npm_deps
