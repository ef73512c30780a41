# heapbpf: eBPF-assisted heap profiler for jemalloc processes.
#
#   make            build build/heapbpf
#   make demo       install what is missing, build, profile the example service
#   make test       install what is missing, build, run unit + integration tests
#   make install    install heapbpf, heapbpf(8) and the systemd units (PREFIX, DESTDIR)
#   make V=1 ...    show the commands

# The architecture built for is the compiler's: make ARCH=arm64 on another
# machine cross-builds with aarch64-linux-gnu-gcc (so does CC=aarch64-linux-gnu-gcc)
# against Debian's arm64 packages unpacked into SYSROOT (scripts/arm64-sysroot.sh),
# into build/arm64 with a jemalloc built with profiling (Debian's arm64 one has none)
HOST_ARCH  := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
ifeq ($(origin CC)$(ARCH),defaultarm64)
ifneq ($(HOST_ARCH),arm64)
CC         := aarch64-linux-gnu-gcc
endif
endif
CC_TRIPLET := $(shell $(CC) -dumpmachine)
ARCH       ?= $(patsubst x86_64,x86,$(patsubst aarch64,arm64,$(firstword $(subst -, ,$(CC_TRIPLET)))))
ifneq ($(ARCH),$(HOST_ARCH))
CROSS      := 1
SYSROOT    ?= build/$(ARCH)-sysroot
override CC := $(CC) --sysroot=$(SYSROOT)
endif
BUILD      ?= $(if $(CROSS),build/$(ARCH),build)
CLANG      ?= clang
BPFTOOL    ?= bpftool
PROTOC_C   ?= protoc-c
LIBDIR     ?= $(SYSROOT)/usr/lib/$(shell $(CC) -print-multiarch)
PPROF_PROTO ?= /usr/share/gocode/src/github.com/google/pprof/proto/profile.proto

CFLAGS     ?= -g -O2
override CFLAGS += -Wall -Wextra -Werror -std=gnu11 -D_GNU_SOURCE
# make SANITIZE=1: user space and tests built with ASan (+LSan) and UBSan
ifeq ($(SANITIZE),1)
override CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer \
		   -fno-sanitize-recover=undefined
endif
# user/ in stage folders, lowest first: a file includes only headers of its own
# folder or of lower ones, naming the folder; run/ is what every live command
# shares, cmd/ the commands (none includes another), main.c the command table
# on top (scripts/layers.py checks it in make lint; docs/architecture.md)
USER_LAYERS := util symbols jemalloc collect profile heap export targets sampling run cli cmd
USER_INC   := -Iuser
CPPFLAGS   += -I$(BUILD) -I$(BUILD)/proto -Ibpf $(USER_INC) -MMD -MP
LDLIBS     += -lbpf -ldw -lelf -ldebuginfod -lz -lzstd -lprotobuf-c -liberty -lcurl -lm
ifeq ($(filter x86 arm64,$(ARCH)),)
$(error heapbpf builds for x86 and arm64, not ARCH=$(ARCH))
endif
# vmlinux/vmlinux.h is x86's, vmlinux/arm64/vmlinux.h arm64's (vmlinux/README.md)
VMLINUX_DIR := $(if $(filter x86,$(ARCH)),vmlinux,vmlinux/$(ARCH))
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror -I$(VMLINUX_DIR) -Ibpf -I$(BUILD)
# what heapbpf's BPF object reads differently on arm64 is in bpf/arm64/, forced
# in: x86's object is built from files with no arm64 code (make check-bpf-arch)
HEAPBPF_BPF_ARCH := $(if $(filter x86,$(ARCH)),,-include bpf/$(ARCH)/heapbpf_arch.bpf.h)

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

USER_SRCS  := $(wildcard user/*.c $(USER_LAYERS:%=user/%/*.c))
USER_OBJS  := $(patsubst user/%.c,$(BUILD)/user/%.o,$(USER_SRCS))
# Pyroscope's push API: the messages heapbpf sends, in proto/ (their upstream files' layout)
PUSH_PROTOS := proto/types/v1/types.proto proto/push/v1/push.proto
PUSH_PB_H  := $(PUSH_PROTOS:proto/%.proto=$(BUILD)/proto/%.pb-c.h)
PUSH_PB_O  := $(PUSH_PROTOS:proto/%.proto=$(BUILD)/proto/%.pb-c.o)
PROTO_OBJS := $(BUILD)/proto/profile.pb-c.o $(PUSH_PB_O)
LIB_OBJS   := $(filter-out $(BUILD)/user/main.o,$(USER_OBJS)) $(PROTO_OBJS)
UNIT_SRCS  := $(wildcard tests/unit/*.c)
UNIT_OBJS  := $(patsubst tests/%.c,$(BUILD)/tests/%.o,$(UNIT_SRCS))
ITEST_SRCS := $(wildcard tests/integration/*.c)
ITEST_OBJS := $(patsubst tests/%.c,$(BUILD)/tests/%.o,$(ITEST_SRCS))
TLIB_SRCS  := $(wildcard tests/lib/*.c)
TLIB_OBJS  := $(patsubst tests/%.c,$(BUILD)/tests/%.o,$(TLIB_SRCS))

# Debian's arm64 libjemalloc is built without profiling: on arm64 the
# examples link one built with it from Debian's source (scripts/build-jemalloc-arm64.sh)
ifeq ($(ARCH),arm64)
JEMALLOC_DIR   := $(BUILD)/jemalloc-prof
JEMALLOC_A     := $(JEMALLOC_DIR)/lib/libjemalloc.a
JEMALLOC_PIC_A := $(JEMALLOC_DIR)/lib/libjemalloc_pic.a
JEMALLOC_INC   := -I$(JEMALLOC_DIR)/include
JEMALLOC_CXX   :=
else
JEMALLOC_A     := $(LIBDIR)/libjemalloc.a
JEMALLOC_PIC_A := $(LIBDIR)/libjemalloc_pic.a
JEMALLOC_CXX   := -lstdc++
endif
EXAMPLES := $(BUILD)/examples/alloc-service-static $(BUILD)/examples/alloc-service-shared
BENCH_BINS := $(BUILD)/bench/microbench $(BUILD)/bench/trapfloor $(BUILD)/bench/userbench \
	$(BUILD)/bench/stackheap $(BUILD)/bench/heapbpf

.DELETE_ON_ERROR:
.PHONY: all deps demo test unit integration examples clean format-check _demo _test fuzz bench _bench \
	test-sanitize _test-sanitize lint
NPROC      := $(shell nproc)

all: $(BUILD)/heapbpf

# ---- set-up -----------------------------------------------------------------

deps:
	$(Q)scripts/install-deps.sh

# the arm64 tree a cross build compiles and links against (scripts/arm64-sysroot.sh)
ifeq ($(CROSS)$(ARCH),1arm64)
$(SYSROOT)/.heapbpf-sysroot: scripts/arm64-sysroot.sh
	$(Q)scripts/arm64-sysroot.sh $(SYSROOT)
$(USER_OBJS) $(PROTO_OBJS): | $(SYSROOT)/.heapbpf-sysroot
endif

# demo/test install first, then re-enter make so nothing is evaluated before
# the tools exist. make test runs several jobs at a time (-O: each job's
# output in one piece); what it runs is under "tests" below.
demo: deps
	$(Q)$(MAKE) --no-print-directory _demo
test: deps
	$(Q)$(MAKE) --no-print-directory -j$(TEST_MAKE_JOBS) -O _test

# The unit and integration tests once more, heapbpf and the tests built with
# AddressSanitizer (LeakSanitizer included) and UBSan, in their own build directory.
test-sanitize: deps
	$(Q)$(MAKE) --no-print-directory -j$(TEST_MAKE_JOBS) -O _test-sanitize

_demo: $(BUILD)/heapbpf $(EXAMPLES)
	$(Q)scripts/demo.sh $(BUILD)

unit: $(BUILD)/tests/unit_tests
	$(BUILD)/tests/unit_tests
integration: $(BUILD)/heapbpf $(EXAMPLES) $(BENCH_BINS) $(BUILD)/tests/integration_tests
	$(BUILD)/tests/integration_tests --jobs 1

# The integration tests of tests/kernels/subset on Debian's kernels (bullseye's
# 5.10, bookworm's 6.1, trixie's 6.12, sid's newest; fetched with apt-get
# download into $(BUILD)/kernels, never installed), each booted under qemu with
# software emulation on the host's root, with cgroup2 and, where the kernel
# also has it, once more with cgroup v1's memory controller: one line per
# kernel, the table in $(BUILD)/kernels/results.md (tests/kernels/run.sh).
# First the runner's own check: a heapbpf built to fail in the guest fails
# its kernel's line (tests/kernels/check-runner.sh); a kernel that cannot be
# fetched or booted fails the run. Not part of make test yet: under
# emulation on this 2-core machine it does not fit make test's time
# (BENCHMARKS.md), and its tests' own time limits still fail there.
.PHONY: test-kernels _test-kernels
test-kernels: deps
	$(Q)$(MAKE) --no-print-directory _test-kernels
_test-kernels: $(BUILD)/heapbpf $(EXAMPLES) $(BENCH_BINS) $(BUILD)/tests/integration_tests fixtures
	$(Q)tests/kernels/check-runner.sh $(BUILD)
	$(Q)tests/kernels/run.sh $(BUILD)

# heapbpf, the example service and the integration tests built for arm64
# (cross on another machine: scripts/arm64-sysroot.sh's tree,
# scripts/build-jemalloc-arm64.sh's jemalloc), run on Debian's arm64 kernels
# booted under qemu-system-aarch64 with software emulation: a one-shot run,
# an arm64 core, and the integration tests of tests/arm64/subset; this
# machine's heapbpf reads the profiles and the core (tests/arm64/run.sh,
# ARM64_SUITES). Not part of make test.
ARM64_SYSROOT := build/arm64-sysroot
ARM64_BUILD   := build/arm64
ifeq ($(CROSS),)
$(ARM64_SYSROOT)/.heapbpf-sysroot: scripts/arm64-sysroot.sh
	$(Q)scripts/arm64-sysroot.sh $(ARM64_SYSROOT)
endif
.PHONY: test-arm64 _test-arm64 _arm64-build
test-arm64: deps
	$(Q)$(MAKE) --no-print-directory BUILD=build _test-arm64
_test-arm64: _arm64-build
	$(Q)tests/arm64/run.sh $(ARM64_BUILD) $(ARM64_SYSROOT) $(BUILD)/heapbpf
_arm64-build: $(BUILD)/heapbpf $(ARM64_SYSROOT)/.heapbpf-sysroot
	$(Q)$(MAKE) --no-print-directory ARCH=arm64 BUILD=$(ARM64_BUILD) SYSROOT=$(ARM64_SYSROOT) \
		$(ARM64_BUILD)/heapbpf $(ARM64_BUILD)/examples/alloc-service-static \
		$(ARM64_BUILD)/examples/alloc-service-shared $(ARM64_BUILD)/tests/integration_tests

# ---- BPF --------------------------------------------------------------------

# the uprobe programs' stack under 48 bytes, which a preemptible uprobe
# needs on 6.13 and later (scripts/bpf-stack.sh)
$(BUILD)/heapbpf.bpf.o: bpf/heapbpf.bpf.c scripts/bpf-stack.sh | $(BUILD)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) $(HEAPBPF_BPF_ARCH) -MMD -MP -c $< -o $@
	$(Q)scripts/bpf-stack.sh $@

$(BUILD)/heapbpf.skel.h: $(BUILD)/heapbpf.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name heapbpf_bpf > $@

# ---- pprof protobuf (generated from the profile.proto Debian ships) ----------

$(BUILD)/proto/profile.pb-c.c $(BUILD)/proto/profile.pb-c.h &: $(PPROF_PROTO)
	$(call msg,PROTOC,$@)
	$(Q)mkdir -p $(BUILD)/proto
	$(Q)$(PROTOC_C) --proto_path=$(dir $(PPROF_PROTO)) --c_out=$(BUILD)/proto $(PPROF_PROTO)

$(BUILD)/proto/%.pb-c.c $(BUILD)/proto/%.pb-c.h: proto/%.proto
	$(call msg,PROTOC,$@)
	$(Q)mkdir -p $(BUILD)/proto
	$(Q)$(PROTOC_C) --proto_path=proto --c_out=$(BUILD)/proto $<

$(BUILD)/proto/push/v1/push.pb-c.c: $(BUILD)/proto/types/v1/types.pb-c.h

$(BUILD)/proto/%.pb-c.o: $(BUILD)/proto/%.pb-c.c
	$(call msg,CC,$@)
	$(Q)$(CC) -g -O2 -Wall -I$(BUILD)/proto -c $< -o $@

# ---- user space -------------------------------------------------------------

# The generated headers exist before anything compiles (order-only); which
# object includes which is then in its -MMD dependencies, so a change to the
# BPF program rebuilds the skeleton, probes.o and the link, nothing else.
GEN_H := $(BUILD)/heapbpf.skel.h $(BUILD)/proto/profile.pb-c.h $(PUSH_PB_H)
$(USER_OBJS): | $(GEN_H)
# the flame graph viewer is assembled into the object (.incbin), which -MMD does not see
$(BUILD)/user/profile/flamegraph_page.o: user/profile/flamegraph.js user/profile/flamegraph.css

$(BUILD)/user/%.o: user/%.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/heapbpf: $(USER_OBJS) $(PROTO_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# heapbpf for bench/bpfstats.py alone: its BPF object keeps the knob that
# leaves parts of the programs out (HEAPBPF_BENCH), which heapbpf's own has not
$(BUILD)/bench/heapbpf.bpf.o: bpf/heapbpf.bpf.c | $(BUILD)
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(BPF_CFLAGS) $(HEAPBPF_BPF_ARCH) -DHEAPBPF_BENCH -MMD -MP -c $< -o $@

$(BUILD)/bench/heapbpf.skel.h: $(BUILD)/bench/heapbpf.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name heapbpf_bpf > $@

$(BUILD)/bench/probes.o: user/sampling/probes.c $(BUILD)/bench/heapbpf.skel.h | $(GEN_H)
	$(call msg,CC,$@)
	$(Q)$(CC) -I$(BUILD)/bench -DHEAPBPF_BENCH $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/bench/heapbpf: $(filter-out $(BUILD)/user/sampling/probes.o,$(USER_OBJS)) \
		$(BUILD)/bench/probes.o $(PROTO_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# ---- examples ---------------------------------------------------------------

# A shared libjemalloc with its symbol table (Debian's libjemalloc.so.2 is
# stripped), linked from Debian's own PIC archive.
$(BUILD)/jemalloc/libjemalloc.so.2: $(JEMALLOC_PIC_A) | $(BUILD)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -shared -Wl,-soname,libjemalloc.so.2 -o $@ \
		-Wl,--whole-archive $< -Wl,--no-whole-archive $(JEMALLOC_CXX) -lpthread -lm -ldl

ifeq ($(ARCH),arm64)
$(JEMALLOC_A) $(JEMALLOC_PIC_A) &: scripts/build-jemalloc-arm64.sh | $(BUILD)
	$(Q)scripts/build-jemalloc-arm64.sh $(BUILD) "$(CC)"
endif

$(BUILD)/examples/alloc-service-static: examples/alloc-service.c $(JEMALLOC_A) | $(BUILD)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -g -O2 -Wall -Wextra -Werror -pthread -MMD -MP $(JEMALLOC_INC) $< $(JEMALLOC_A) \
		-lm -ldl -o $@

$(BUILD)/examples/alloc-service-shared: examples/alloc-service.c $(BUILD)/jemalloc/libjemalloc.so.2
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -g -O2 -Wall -Wextra -Werror -pthread $(JEMALLOC_INC) $< -L$(BUILD)/jemalloc \
		-l:libjemalloc.so.2 -Wl,-rpath,'$$ORIGIN/../jemalloc' -lm -o $@

examples: $(EXAMPLES)

# ---- tests ------------------------------------------------------------------

# jemalloc 5.3.0/5.2.1 builds from Debian's sources (tests/fixtures/fixtures.mk)
# and 5.3.1 ones from sid's (tests/fixtures/fixtures-531.mk, a set with its own
# cache key) for test_versions, kept outside the clone while their inputs are unchanged
# (scripts/build-jemalloc-fixtures.sh); found by the tests through
# HEAPBPF_FIXTURES (also by the runs with another BUILD, such as the sanitizer run).
# Beside them, redis-server with its bundled jemalloc, built as upstream builds
# it from trixie's redis tarball (scripts/build-redis-fixture.sh), for test_reach.
export HEAPBPF_FIXTURES ?= $(abspath $(BUILD))/fixtures
.PHONY: fixtures
fixtures:
	$(Q)scripts/build-jemalloc-fixtures.sh $(BUILD)
	$(Q)scripts/build-redis-fixture.sh $(BUILD)

# make test: the format and lint checks; both builds (plain, and $(SAN) with
# ASan/UBSan) and the fixtures; each pass's test groups (scripts/run-tests.sh
# BUILD GROUP): unit, integration (every suite but versions and the serial
# ones), versions (on the fixtures), serial (SERIAL_SUITES in run-tests.sh:
# soak, which loads every core on purpose, and leaks, which measures in time)
# and, in the plain pass, fuzz (the fuzzer has the sanitizers built in). Every
# job starts as soon as what it needs is built: the tests of one pass beside
# the other's and beside the builds; lint and the fixtures (minutes when they
# are not cached; only versions needs them) at a lower priority; the fuzzer
# (a core for a minute) once the builds are done. make runs two jobs per core, plus one per
# test group, as the groups mostly wait: the integration tests of both passes
# share HEAPBPF_TEST_JOBS slots (default: cores + 1) in $(BUILD)/test-slots,
# and a serial test takes all of them. Each group leaves its counts in
# BUILD/test-results/GROUP.counts and a failing group does not stop the others
# (make says "ignored"): scripts/test-total.sh adds the counts up into the
# closing line and fails unless every group ran and passed.
SAN          := $(BUILD)-sanitize
PLAIN_GROUPS := unit integration versions fuzz serial
SAN_GROUPS   := unit integration versions serial
PLAIN_RUNS   := $(PLAIN_GROUPS:%=_plain-%)
SAN_RUNS     := $(SAN_GROUPS:%=_san-%)
.PHONY: _san-build $(PLAIN_RUNS) $(SAN_RUNS)
TEST_MAKE_JOBS = $(shell echo $$(($(NPROC) * 2 + $(words $(PLAIN_RUNS) $(SAN_RUNS)))))

export HEAPBPF_TEST_SLOTS ?= $(abspath $(BUILD))/test-slots
_test: fixtures $(PLAIN_RUNS) format-check lint $(SAN_RUNS)
	$(Q)scripts/test-total.sh $(PLAIN_GROUPS:%=$(BUILD)/test-results/%) \
		$(SAN_GROUPS:%=$(SAN)/test-results/%)
_test-sanitize: $(SAN_RUNS)
	$(Q)scripts/test-total.sh $(SAN_GROUPS:%=$(SAN)/test-results/%)

_plain-unit: $(BUILD)/tests/unit_tests
_plain-integration _plain-serial: $(BUILD)/heapbpf $(EXAMPLES) $(BENCH_BINS) \
	$(BUILD)/tests/integration_tests
_plain-versions: $(BUILD)/heapbpf $(BUILD)/tests/integration_tests fixtures
_plain-fuzz: $(BUILD)/fuzz/fuzz_recording $(BUILD)/fuzz/fuzz_pprof $(BUILD)/fuzz/fuzz_layout \
	_san-build
$(PLAIN_RUNS): _plain-%:
	-$(Q)scripts/run-tests.sh $(BUILD) $*

_san-build:
	$(Q)$(MAKE) --no-print-directory BUILD=$(SAN) SANITIZE=1 $(SAN)/heapbpf \
		$(SAN)/tests/unit_tests $(SAN)/tests/integration_tests \
		$(SAN)/examples/alloc-service-static $(SAN)/examples/alloc-service-shared \
		$(SAN)/bench/microbench $(SAN)/bench/trapfloor $(SAN)/bench/userbench \
		$(SAN)/bench/stackheap $(SAN)/bench/heapbpf
	@# the jemalloc fixtures are plain builds: share the first pass's
	$(Q)ln -sfn $(abspath $(BUILD))/fixtures $(SAN)/fixtures
_san-unit _san-integration _san-versions _san-serial: _san-build
_san-versions: fixtures
$(SAN_RUNS): _san-%:
	-$(Q)SANITIZED=1 scripts/run-tests.sh $(SAN) $*

$(BUILD)/tests/%.o: tests/%.c | $(BUILD) $(GEN_H)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) -Itests/lib $(CFLAGS) -c $< -o $@

# the command table of user/main.c, without its main(): the unit tests parse with it
$(BUILD)/tests/heapbpf_main.o: user/main.c | $(BUILD) $(GEN_H)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -Dmain=heapbpf_main -c $< -o $@

$(BUILD)/tests/unit_tests: $(UNIT_OBJS) $(TLIB_OBJS) $(LIB_OBJS) $(BUILD)/tests/heapbpf_main.o
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -lcriterion -o $@

$(BUILD)/tests/integration_tests: $(ITEST_OBJS) $(TLIB_OBJS) $(LIB_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -lcriterion -o $@

# ---- benchmarks (make bench; a quick smoke run of them is part of make test) --

# bench/run.py measures into $(BUILD)/bench/results.json, bench/report.py writes BENCHMARKS.md
# from it; make bench-report rewrites the report from that file without measuring again.
bench: deps
	$(Q)$(MAKE) --no-print-directory _bench
_bench: $(BUILD)/heapbpf $(EXAMPLES) $(BENCH_BINS)
	$(Q)python3 bench/run.py --build $(BUILD) --json $(BUILD)/bench/results.json
	$(Q)python3 bench/report.py $(BUILD)/bench/results.json --out BENCHMARKS.md
.PHONY: bench-report
bench-report:
	$(Q)python3 bench/report.py $(BUILD)/bench/results.json --out BENCHMARKS.md

$(BUILD)/bench/microbench: bench/microbench.c $(JEMALLOC_A) | $(BUILD)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -g -O2 -Wall -Wextra -Werror -pthread -MMD -MP $< $(JEMALLOC_A) -lm -ldl -o $@

# a process whose sampled live heap has many distinct stacks (heapbpf --live-heap, report CORE)
$(BUILD)/bench/stackheap: bench/stackheap.c $(JEMALLOC_A) | $(BUILD)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -g -O2 -Wall -Wextra -Werror -pthread -MMD -MP $< $(JEMALLOC_A) -lm -ldl -o $@

$(BUILD)/bench/trapfloor.bpf.o: bench/trapfloor.bpf.c | $(BUILD)
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/bench/trapfloor.skel.h: $(BUILD)/bench/trapfloor.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name trapfloor_bpf > $@

$(BUILD)/bench/trapfloor: bench/trapfloor.c $(BUILD)/bench/trapfloor.skel.h $(BUILD)/heapbpf.skel.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) -I$(BUILD)/bench $(CFLAGS) -pthread $< -lbpf -lelf -lz -o $@

$(BUILD)/bench/userbench.o: bench/userbench.c | $(BUILD) $(GEN_H)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/bench/userbench: $(BUILD)/bench/userbench.o $(LIB_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# ---- fuzzing (make fuzz; a one-minute run is part of make test) -------------

FUZZ_SECONDS ?= 300
# the recording reader and what it stands on: the stages up to collect/, whole
FUZZ_LAYERS := util symbols jemalloc collect
FUZZ_SRCS := $(wildcard $(FUZZ_LAYERS:%=user/%/*.c))
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	      -std=gnu11 -D_GNU_SOURCE -Wall -Werror -Ibuild -Ibpf $(USER_INC)

$(BUILD)/fuzz/fuzz_recording: tests/fuzz/fuzz_recording.c $(FUZZ_SRCS) \
		$(wildcard $(FUZZ_LAYERS:%=user/%/*.h)) bpf/heapbpf.h
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(FUZZ_FLAGS) -I$(BUILD) tests/fuzz/fuzz_recording.c $(FUZZ_SRCS) \
		-lzstd -lz -ldw -lelf -ldebuginfod -liberty -o $@

# the pprof reader and heapbpf diff: diff reaches the recording replay, the
# report and the writers, so every source but main.c is built in
FUZZ_PPROF_SRCS := $(filter-out user/main.c,$(USER_SRCS)) $(BUILD)/proto/profile.pb-c.c \
		   $(PUSH_PROTOS:proto/%.proto=$(BUILD)/proto/%.pb-c.c)
$(BUILD)/fuzz/fuzz_pprof: tests/fuzz/fuzz_pprof.c $(FUZZ_PPROF_SRCS) $(wildcard user/*.h user/*/*.h) \
	bpf/heapbpf.h $(BUILD)/heapbpf.skel.h $(BUILD)/proto/profile.pb-c.h $(PUSH_PB_H)
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(FUZZ_FLAGS) -I$(BUILD) -I$(BUILD)/proto tests/fuzz/fuzz_pprof.c \
		$(FUZZ_PPROF_SRCS) $(LDLIBS) -o $@

# the layout reader (DWARF) and the live-heap walker that reads a target's
# memory with a layout: heap/ and the stages below it but profile/ (not used)
FUZZ_LAYOUT_LAYERS := util symbols jemalloc collect heap
FUZZ_LAYOUT_SRCS := $(wildcard $(FUZZ_LAYOUT_LAYERS:%=user/%/*.c))
$(BUILD)/fuzz/fuzz_layout: tests/fuzz/fuzz_layout.c $(FUZZ_LAYOUT_SRCS) \
		$(wildcard $(FUZZ_LAYOUT_LAYERS:%=user/%/*.h)) bpf/heapbpf.h
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(FUZZ_FLAGS) -I$(BUILD) tests/fuzz/fuzz_layout.c $(FUZZ_LAYOUT_SRCS) \
		$(LDLIBS) -o $@

FUZZ_BINS := $(BUILD)/fuzz/fuzz_recording $(BUILD)/fuzz/fuzz_pprof $(BUILD)/fuzz/fuzz_layout
fuzz: deps
	$(Q)$(MAKE) --no-print-directory $(FUZZ_BINS)
	$(Q)scripts/fuzz.sh $(BUILD) $(FUZZ_SECONDS)

# ---- install ----------------------------------------------------------------

# make install [PREFIX=/usr/local] [DESTDIR=/staging]; make uninstall with the same
# variables removes exactly those files (never a directory). heapbpf goes to bin,
# not sbin: a live run needs root, but heapbpf report and diff read files and need
# no privilege, and Debian's PATH for users has no sbin (sudo's has both). The
# systemd units go where systemd looks for them under PREFIX, with their
# ExecStart= rewritten to the installed binary.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
UNITDIR ?= $(PREFIX)/lib/systemd/system
# the jemalloc with its symbol table (Debian's is stripped), for LD_PRELOAD into
# a service whose own has no debug symbols at hand; heapbpf finds it beside itself
# (BINDIR/../lib/heapbpf: PKGLIBDIR follows PREFIX, as the error names it)
PKGLIBDIR ?= $(PREFIX)/lib/heapbpf
UNITS   := heapbpf-agent.service heapbpf-snapshot@.service heapbpf-snapshot@.timer \
	   heapbpf-watch@.service
# heapbpf(8), and one page per command
MANPAGES := heapbpf.8 heapbpf-report.8 heapbpf-diff.8 heapbpf-top.8 heapbpf-watch.8 \
	    heapbpf-agent.8 heapbpf-status.8 heapbpf-rss.8
INSTALLED := $(BINDIR)/heapbpf $(MANPAGES:%=$(MANDIR)/man8/%) $(UNITS:%=$(UNITDIR)/%) \
	     $(PKGLIBDIR)/libjemalloc.so.2

.PHONY: install uninstall
install: $(BUILD)/heapbpf $(BUILD)/jemalloc/libjemalloc.so.2
	$(Q)case "$(BINDIR)" in /*) ;; *) echo "heapbpf: BINDIR (PREFIX) must be an absolute path, not \"$(BINDIR)\"" >&2; exit 1;; esac
	$(call msg,INSTALL,$(DESTDIR)$(BINDIR)/heapbpf)
	$(call msg,INSTALL,$(MANPAGES:%=$(DESTDIR)$(MANDIR)/man8/%))
	$(call msg,INSTALL,$(UNITS:%=$(DESTDIR)$(UNITDIR)/%))
	$(call msg,INSTALL,$(DESTDIR)$(PKGLIBDIR)/libjemalloc.so.2)
	@# the units are rewritten in a directory of this run's own (installs may run side by side)
	$(Q)set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for u in $(UNITS); do \
		sed 's#^\(ExecStart=[-@:+!]*\)[^ ]*/heapbpf #\1$(BINDIR)/heapbpf #' \
			examples/systemd/$$u > "$$tmp/$$u"; \
	done; \
	for u in heapbpf-agent.service heapbpf-snapshot@.service heapbpf-watch@.service; do \
		grep -q '^ExecStart=$(BINDIR)/heapbpf ' "$$tmp/$$u" || \
			{ echo "heapbpf: ExecStart= of $$u not rewritten" >&2; exit 1; }; \
	done; \
	install -D -m 0755 $(BUILD)/heapbpf $(DESTDIR)$(BINDIR)/heapbpf; \
	install -d $(DESTDIR)$(MANDIR)/man8; \
	install -m 0644 $(MANPAGES:%=man/%) $(DESTDIR)$(MANDIR)/man8/; \
	install -d $(DESTDIR)$(UNITDIR); \
	install -m 0644 $(UNITS:%="$$tmp/%") $(DESTDIR)$(UNITDIR)/; \
	install -D -m 0644 $(BUILD)/jemalloc/libjemalloc.so.2 $(DESTDIR)$(PKGLIBDIR)/libjemalloc.so.2

uninstall:
	$(call msg,RM,$(INSTALLED:%=$(DESTDIR)%))
	$(Q)rm -f $(INSTALLED:%=$(DESTDIR)%)

# ---- misc -------------------------------------------------------------------

$(BUILD):
	$(Q)mkdir -p $@

FORMAT_SRCS := $(wildcard bpf/*.c bpf/*.h bpf/*/*.h user/*.c user/*.h user/*/*.c user/*/*.h tests/*/*.c \
	tests/*/*.h examples/*.c bench/*.c)
# cppcheck and clang-tidy on our own C code, no warning allowed (part of make
# test, where it yields the CPU to the builds the tests wait for)
# (x86-64's and arm64's paths: the arm64 tree for the latter, unless HEAPBPF_SKIP_ARM64=1)
lint: $(BUILD)/heapbpf.skel.h $(BUILD)/proto/profile.pb-c.h $(PUSH_PB_H) \
		$(if $(filter 1,$(HEAPBPF_SKIP_ARM64)),,$(ARM64_SYSROOT)/.heapbpf-sysroot)
	$(Q)python3 scripts/layers.py --isolated cmd --apart sampling=profile,export $(USER_LAYERS)
	$(Q)nice -n 10 scripts/lint.sh $(BUILD) $(ARM64_SYSROOT)
	$(Q)$(MAKE) --no-print-directory check-bpf-arch

# x86's BPF object must not depend on another architecture's code: none of the
# files it is built from is under bpf/arm64/ or vmlinux/arm64/, and none names
# arm64 (scripts/check-bpf-arch.sh; part of make lint)
.PHONY: check-bpf-arch
check-bpf-arch:
	$(Q)scripts/check-bpf-arch.sh "$(CLANG)" $(BUILD)

format-check:
	$(call msg,FORMAT,check)
	$(Q)clang-format --dry-run --Werror $(FORMAT_SRCS)

clean:
	rm -rf $(BUILD)

-include $(wildcard $(BUILD)/*.d $(BUILD)/user/*.d $(BUILD)/user/*/*.d $(BUILD)/tests/*/*.d $(BUILD)/examples/*.d \
	$(BUILD)/bench/*.d)
