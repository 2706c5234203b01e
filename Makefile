# mact: one Makefile.
#   make            libmact.a/.so (the runtime), libmact_data.a/.so and libmact_compress.a/.so (the toolkits),
#                   libmact_export.a (export, parity: the CLI's), the CLI, tests
#   make check      the fast tier: C unit tests and the suites that need neither PyTorch nor npm
#   make test       the whole suite (README's test command)
#   make asan       the whole suite under ASan+UBSan (SUITES="NAME ...": those suites);  make tsan: the concurrency tests under TSan
#   make install    PREFIX=/usr/local DESTDIR= [LIBDIR= INCLUDEDIR= BINDIR=]  (libmact.so.0 and libmact.a,
#                   include/mact.h and mact_stages.h, mact.pc; the toolkits' libraries, headers and .pc; the CLI)
#   make CROSS=aarch64-linux-gnu-   the ARM64 cross build into build-aarch64/ (scripts/setup_arm64.sh installs
#                   the toolchain and the :arm64 -dev packages; tests/test_arm64.sh runs it under qemu)
# The plain-C kernels build with any C11 compiler; the x86 kernels (src/kernels/x86/) are compiled only on
# x86-64, with per-function target attributes and run-time dispatch, so no -march is forced; the ARM NEON
# kernels (src/kernels/arm/) only for aarch64 (Advanced SIMD is baseline there; levels chosen at run time).
CROSS   ?=
ifneq ($(CROSS),)
CC      := $(CROSS)gcc
AR      := $(CROSS)ar
BUILD   ?= build-$(firstword $(subst -, ,$(CROSS)))
endif
CC      ?= cc
AR      ?= ar
BUILD   ?= build
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Iinclude -Isrc -pthread -fPIC
LIBCFLAGS = -fvisibility=hidden -DMACT_BUILD
# What each product links, and nothing more (tests/test_layout.sh reads libmact.so's NEEDED): the runtime its
# JSON, tokenizer and image libraries; the data toolkit the parquet codecs and FFmpeg's libraries (dataset videos,
# src/data/video.c; plain -l so the cross build needs no arm64 pkg-config); export libzip (npz); the CLI cairo and
# libpng (its charts, `mact dataset frame`).
RUNTIME_LIBS := -lcjson -lpcre2-8 -lutf8proc -lpng -ljpeg -lm -pthread
DATA_LIBS    := -lsnappy -lzstd -lz -lavformat -lavcodec -lswscale -lavutil
EXPORT_LIBS  := -lzip -lz
CLI_LIBS     := -lcairo -lpng
LDLIBS  += $(DATA_LIBS) $(EXPORT_LIBS) $(RUNTIME_LIBS)

# the version is stated once, in include/mact.h; the soname's number changes with the ABI
VERSION := $(shell sed -n 's/^\#define MACT_VERSION_STRING "\(.*\)"/\1/p' include/mact.h)
SOVER   := 0
PREFIX  ?= /usr/local
DESTDIR ?=
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR  ?= $(PREFIX)/bin

MACHINE := $(shell $(CC) -dumpmachine)
ARCH_X86 := $(if $(filter x86_64-%,$(MACHINE)),1,)
ARCH_ARM := $(if $(filter aarch64-%,$(MACHINE)),1,)

CFLAGS  += $(if $(ARCH_X86),-DMACT_X86=1) $(if $(ARCH_ARM),-DMACT_ARM=1)
LIB_DIRS := src/base src/io src/model src/kernels src/kernels/ref src/stages $(if $(ARCH_X86),src/kernels/x86) \
            $(if $(ARCH_ARM),src/kernels/arm)
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_OBJ  := $(LIB_SRC:src/%.c=$(BUILD)/obj/%.o)
# The toolkits (include/mact_data.h, include/mact_compress.h): each its own archive and shared library. A
# toolkit's .so carries the runtime objects it calls, hidden (-Wl,--exclude-libs,ALL): it exports only its header's
# functions and needs no other mact library.
BASE_OBJ     := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(wildcard src/base/*.c))
DATA_SRC     := $(wildcard src/data/*.c)
DATA_OBJ     := $(DATA_SRC:src/%.c=$(BUILD)/obj/%.o)
COMPRESS_SRC := $(wildcard src/compress/*.c)
COMPRESS_OBJ := $(COMPRESS_SRC:src/%.c=$(BUILD)/obj/%.o)
# the compression toolkit reads and writes checkpoint files itself (the surgery): the safetensors reader is carried
# with it, hidden, beside src/base/
COMPRESS_PRIVATE := $(BASE_OBJ) $(BUILD)/obj/io/safetensors.o
# the synthetic writers (src/synth/: checkpoints, LeRobot datasets, their parquet and video writers): the CLI's and the
# tests', in libmact_synth.a; no shared library carries them
SYNTH_SRC    := $(wildcard src/synth/*.c)
SYNTH_OBJ    := $(SYNTH_SRC:src/%.c=$(BUILD)/obj/%.o)
# mact export and parity (src/export/: golden I/O, npz, ONNX): the CLI's, in libmact_export.a; the ONNX subset
# schema is compiled by protoc-c (Debian's protobuf-c-compiler) into $(BUILD)/gen/ and linked with -lprotobuf-c
# ONNX= (the default of cross builds, which have no protobuf-c for the target) leaves `mact export onnx` out.
ONNX     ?= $(if $(CROSS),,1)
EXPORT_SRC := $(if $(ONNX),$(wildcard src/export/*.c),$(filter-out src/export/onnx.c src/export/onnx_build.c,$(wildcard src/export/*.c)))
EXPORT_OBJ := $(EXPORT_SRC:src/%.c=$(BUILD)/obj/%.o) $(if $(ONNX),$(BUILD)/obj/gen/onnx_subset.pb-c.o)
PROTOC_C ?= protoc-c
DEV_LIBS := $(if $(ONNX),-lprotobuf-c)
EXPORT_DEPS := $(if $(ONNX),$(BUILD)/gen/onnx_subset.pb-c.h)
# every archive, in link order (a program linking them statically: the CLI, the C tests)
ALL_ARCHIVES := $(BUILD)/libmact_synth.a $(BUILD)/libmact_export.a $(BUILD)/libmact_compress.a $(BUILD)/libmact_data.a \
                $(BUILD)/libmact.a
# the policy server (mact serve): its own archive, linked only into the CLI, never into libmact.so. Left out of
# cross builds (SERVER= ): libwebsockets-dev:arm64 does not co-install with the amd64 package.
SERVER  ?= $(if $(CROSS),,1)
# Its LeRobot async-inference transport (src/server/grpc_lerobot*.c, `mact serve --lerobot`) is gRPC (Debian's
# libgrpc-dev, the C core) with the schema src/server/lerobot_services.proto compiled by protoc-c.
SERVER_SRC := $(if $(SERVER),$(wildcard src/server/*.c))
SERVER_OBJ := $(SERVER_SRC:src/%.c=$(BUILD)/obj/%.o) $(if $(SERVER),$(BUILD)/obj/gen/lerobot_services.pb-c.o)
SERVER_GEN := $(if $(SERVER),$(BUILD)/gen/lerobot_services.pb-c.h)
SERVER_LIB := $(if $(SERVER),$(BUILD)/libmact_server.a)
GRPC_LIBS := -lgrpc -lgpr -lprotobuf-c
SERVER_LIBS := $(if $(SERVER),-lwebsockets -lmsgpackc $(GRPC_LIBS))
TOOLS_SRC := $(if $(SERVER),$(wildcard tools/*.c tools/common/*.c),$(filter-out tools/serve_cmd.c,$(wildcard tools/*.c tools/common/*.c)))
HDRS     := $(wildcard include/*.h src/*/*.h src/*/*/*.h)
# the pickle reader's tests link the server archive, so they exist only where the server is built
PICKLE_TESTS := $(if $(SERVER),$(BUILD)/tests/test_pickle $(BUILD)/tests/pickle_tool)
TESTS    := $(filter-out $(BUILD)/tests/test_pickle,$(patsubst tests/c/%.c,$(BUILD)/tests/%,$(wildcard tests/c/test_*.c))) \
            $(BUILD)/tests/npz_roundtrip_tool $(BUILD)/tests/video_tool $(PICKLE_TESTS) $(if $(SERVER),$(BUILD)/tests/lr_grpc_echo)

TOOLKITS := data compress

# The Python package's version, written from include/mact.h's MACT_VERSION_STRING (the one place the version is
# stated; not in git): the binding compares it with the library's mact_version(), pyproject.toml reads it.
PY_VERSION := python/mact/_version.py

all: $(BUILD)/mact $(BUILD)/libmact.so $(TOOLKITS:%=$(BUILD)/libmact_%.so) $(BUILD)/mact.pc $(TOOLKITS:%=$(BUILD)/mact_%.pc) \
     $(TESTS) $(PY_VERSION)

$(PY_VERSION): include/mact.h
	@printf '"""Written by make from include/mact.h (MACT_VERSION_STRING): the headers this binding mirrors."""\n__version__ = "%s"\n' \
	    '$(VERSION)' >$@.$$$$.tmp && mv -f $@.$$$$.tmp $@

# one protoc-c run writes both files: the .c hangs off the .h so a parallel make runs it once
$(BUILD)/gen/onnx_subset.pb-c.h: src/export/onnx_subset.proto
	@mkdir -p $(BUILD)/gen
	$(PROTOC_C) --c_out=$(BUILD)/gen --proto_path=src/export $<

$(BUILD)/gen/onnx_subset.pb-c.c: $(BUILD)/gen/onnx_subset.pb-c.h
	@test -f $@ || { rm -f $<; $(MAKE) $<; }

$(BUILD)/obj/gen/onnx_subset.pb-c.o: $(BUILD)/gen/onnx_subset.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(BUILD)/gen -c $< -o $@

$(BUILD)/obj/export/%.o: src/export/%.c $(HDRS) $(EXPORT_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(if $(ONNX),,-DMACT_NO_ONNX) -I$(BUILD)/gen -c $< -o $@

$(BUILD)/gen/lerobot_services.pb-c.h: src/server/lerobot_services.proto
	@mkdir -p $(BUILD)/gen
	$(PROTOC_C) --c_out=$(BUILD)/gen --proto_path=src/server $<

$(BUILD)/gen/lerobot_services.pb-c.c: $(BUILD)/gen/lerobot_services.pb-c.h
	@test -f $@ || { rm -f $<; $(MAKE) $<; }

$(BUILD)/obj/gen/lerobot_services.pb-c.o: $(BUILD)/gen/lerobot_services.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(BUILD)/gen -c $< -o $@

$(BUILD)/obj/server/%.o: src/server/%.c $(HDRS) $(SERVER_GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(BUILD)/gen -c $< -o $@

$(BUILD)/libmact_server.a: $(SERVER_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIBCFLAGS) -c $< -o $@

$(BUILD)/libmact.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/libmact_data.a: $(DATA_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/libmact_compress.a: $(COMPRESS_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/libmact_synth.a: $(SYNTH_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/libmact_export.a: $(EXPORT_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

# the shared libraries export only what include/ marks MACT_API
$(BUILD)/libmact.so: $(LIB_OBJ)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libmact.so.$(SOVER) -Wl,--no-undefined $^ $(RUNTIME_LIBS) -o $@

# the runtime by its soname beside the libraries in the build tree (the loader finds it there through $ORIGIN)
$(BUILD)/libmact.so.$(SOVER): $(BUILD)/libmact.so
	ln -sf libmact.so $@

# A toolkit is a client of the runtime: it links libmact.so (NEEDED libmact.so.0) and calls only its public API, so
# a process holds one runtime whatever it imports; the small helpers of src/base/ (errors, files, strict JSON, the
# clock, FNV) it carries itself, hidden.
$(BUILD)/libmact_data.so: $(DATA_OBJ) $(BASE_OBJ) $(BUILD)/libmact.so.$(SOVER)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libmact_data.so.$(SOVER) -Wl,--no-undefined -Wl,-rpath,'$$ORIGIN' \
	    $(DATA_OBJ) $(BASE_OBJ) -L$(BUILD) -lmact $(DATA_LIBS) -lcjson -lm -pthread -o $@

$(BUILD)/libmact_data.so.$(SOVER): $(BUILD)/libmact_data.so
	ln -sf libmact_data.so $@

$(BUILD)/libmact_compress.so: $(COMPRESS_OBJ) $(COMPRESS_PRIVATE) $(BUILD)/libmact_data.so.$(SOVER) $(BUILD)/libmact.so.$(SOVER)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libmact_compress.so.$(SOVER) -Wl,--no-undefined -Wl,-rpath,'$$ORIGIN' \
	    $(COMPRESS_OBJ) $(COMPRESS_PRIVATE) -L$(BUILD) -lmact_data -lmact -lcjson -lm -pthread -o $@

# pkg-config file for the install paths (rebuilt when they change: the paths are in the command)
$(BUILD)/mact.pc: mact.pc.in include/mact.h Makefile FORCE
	@mkdir -p $(dir $@)
	@sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	    -e 's|@VERSION@|$(VERSION)|g' -e 's|@LIBS_PRIVATE@|$(strip $(RUNTIME_LIBS))|g' mact.pc.in > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

DESC_data     := mact data toolkit: LeRobot datasets, norm statistics, open-loop evaluation
DESC_compress := mact compression toolkit: ViT SNR analysis, pruning, distillation checks, checkpoint synthesis
REQ_data      := mact
REQ_compress  := mact_data mact
# a toolkit's: its archive needs libmact.a (and the compression toolkit libmact_data.a) after it when linked statically
$(BUILD)/mact_%.pc: mact_toolkit.pc.in include/mact.h Makefile FORCE
	@mkdir -p $(dir $@)
	@sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	    -e 's|@VERSION@|$(VERSION)|g' -e 's|@NAME@|$*|g' \
	    -e 's|@DESCRIPTION@|$(DESC_$*)|g' -e 's|@REQUIRES@|$(REQ_$*)|g' \
	    -e 's|@LIBS_PRIVATE@|$(strip $(DATA_LIBS))|g' mact_toolkit.pc.in > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

# the CLI: tools/mact.c's command table dispatches to one file per front end (tools/*.c), which parse flags and call
# the libraries; tools/common/ holds the shared argument parser and output helpers (cairo draws the charts)
$(BUILD)/mact: $(TOOLS_SRC) $(wildcard tools/*.h tools/common/*.h) $(SERVER_LIB) $(ALL_ARCHIVES)
	$(CC) $(CFLAGS) $(if $(SERVER),,-DMACT_NO_SERVER) -Itools $(TOOLS_SRC) $(SERVER_LIB) $(ALL_ARCHIVES) $(SERVER_LIBS) $(LDLIBS) $(DEV_LIBS) $(CLI_LIBS) -o $@

$(BUILD)/tests/%: tests/c/%.c tests/c/th.h $(ALL_ARCHIVES)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/c $< $(ALL_ARCHIVES) $(LDLIBS) $(DEV_LIBS) -o $@

$(PICKLE_TESTS): $(BUILD)/tests/%: tests/c/%.c tests/c/th.h $(SERVER_LIB) $(BUILD)/libmact.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/c $< $(SERVER_LIB) $(BUILD)/libmact.a $(LDLIBS) -o $@

# the LeRobot gRPC transport alone, with recording handlers, for tests/test_lerobot_grpc.sh
$(BUILD)/tests/lr_grpc_echo: tests/c/lr_grpc_echo.c src/server/grpc_lerobot.h $(SERVER_LIB) $(BUILD)/libmact.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(SERVER_LIB) $(BUILD)/libmact.a $(GRPC_LIBS) -lz -pthread -o $@

test: all
	BUILD=$(BUILD) tests/run.sh $(SUITES)

check: all
	BUILD=$(BUILD) tests/run.sh --fast $(SUITES)

asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" SUITES="$(SUITES)" test

tsan:
	$(MAKE) BUILD=build-tsan OPT="-O1 -g -fsanitize=thread" all
	BUILD=build-tsan TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" tests/run.sh test_concurrency test_kernels

# Debian's split: libmact.so.0 (the runtime package: the real file and the soname link) and libmact.so,
# libmact.a, the headers and mact.pc (the -dev package). Shared libraries are installed 644, as Debian does.
# The toolkits likewise: libmact_data.so.0 / libmact_compress.so.0, their archives, headers and .pc files.
install: $(BUILD)/libmact.a $(BUILD)/libmact.so $(BUILD)/mact $(BUILD)/mact.pc $(TOOLKITS:%=$(BUILD)/libmact_%.a) \
         $(TOOLKITS:%=$(BUILD)/libmact_%.so) $(TOOLKITS:%=$(BUILD)/mact_%.pc)
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(BINDIR)
	install -m 644 $(BUILD)/libmact.a $(DESTDIR)$(LIBDIR)/libmact.a
	install -m 644 $(BUILD)/libmact.so $(DESTDIR)$(LIBDIR)/libmact.so.$(VERSION)
	ln -sf libmact.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libmact.so.$(SOVER)
	ln -sf libmact.so.$(SOVER) $(DESTDIR)$(LIBDIR)/libmact.so
	install -m 644 include/mact.h include/mact_stages.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 755 $(BUILD)/mact $(DESTDIR)$(BINDIR)/mact
	install -m 644 $(BUILD)/mact.pc $(DESTDIR)$(LIBDIR)/pkgconfig/mact.pc
	for t in $(TOOLKITS); do \
	    install -m 644 $(BUILD)/libmact_$$t.a $(DESTDIR)$(LIBDIR)/libmact_$$t.a && \
	    install -m 644 $(BUILD)/libmact_$$t.so $(DESTDIR)$(LIBDIR)/libmact_$$t.so.$(VERSION) && \
	    ln -sf libmact_$$t.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libmact_$$t.so.$(SOVER) && \
	    ln -sf libmact_$$t.so.$(SOVER) $(DESTDIR)$(LIBDIR)/libmact_$$t.so && \
	    install -m 644 include/mact_$$t.h $(DESTDIR)$(INCLUDEDIR)/ && \
	    install -m 644 $(BUILD)/mact_$$t.pc $(DESTDIR)$(LIBDIR)/pkgconfig/mact_$$t.pc || exit 1; \
	done

# libFuzzer targets (fuzz/README.md): clang 14 with libclang-rt-14-dev. `make fuzz FUZZ_SECONDS=N` builds every
# target and runs each for N seconds on one core; new inputs go to build/fuzz/corpus/<target>, the seeds are
# read from fuzz/corpus/<target>, a crash leaves build/fuzz/<target>-crash-* and fails the run.
FUZZ_CC      ?= $(shell command -v clang-14 2>/dev/null || command -v clang 2>/dev/null || echo clang)
FUZZ_SECONDS ?= 60
FUZZ_SERVE   := $(if $(SERVER),wire serve_openpi serve_act serve_vla serve_route)
FUZZ_LR      := $(if $(SERVER),lr_proto pickle)
FUZZ_TARGETS := safetensors config normstats lerobot tokenizer npy image prompt parquet video $(FUZZ_SERVE) $(FUZZ_LR)
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
                -fno-sanitize-recover=undefined -Iinclude -Isrc -Ifuzz -pthread
FUZZ_LIB_SRC := $(wildcard src/base/*.c) src/model/config.c src/model/lerobot.c src/io/safetensors.c \
                src/io/normstats.c src/io/hfcache.c src/io/tokenizer.c src/io/image.c src/io/npy.c src/export/npz.c \
                src/stages/prompt.c src/stages/rtc_names.c src/data/parquet.c src/data/video.c
FUZZ_OBJ     := $(FUZZ_LIB_SRC:src/%.c=$(BUILD)/fuzz/obj/%.o)
FUZZ_LDLIBS  := $(filter-out -fopenmp,$(LDLIBS))
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)

$(BUILD)/fuzz/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_common.h $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_OBJ) $(FUZZ_LDLIBS) -o $@

# the server's codecs, request decoders and protocols: every src/server file but the event loop and its threads
# (server.c, queue.c, loader.c, write.c, metrics.c, own.c; fuzz/serve_stub.h stands in for them and the model) and
# the gRPC service
FUZZ_SRV_OBJ := $(patsubst src/%.c,$(BUILD)/fuzz/obj/%.o,$(filter-out src/server/server.c src/server/queue.c \
                  src/server/loader.c src/server/write.c src/server/metrics.c src/server/own.c \
                  src/server/grpc_lerobot.c src/server/grpc_lerobot_msg.c src/server/lerobot_service.c,\
                  $(SERVER_SRC)))
$(FUZZ_SERVE:%=$(BUILD)/fuzz/fuzz_%): $(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_common.h fuzz/serve_stub.h $(FUZZ_OBJ) $(FUZZ_SRV_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_SRV_OBJ) $(FUZZ_OBJ) \
	    $(FUZZ_LDLIBS) -lmsgpackc -o $@

# LeRobot's async-inference messages (protobuf-c) and the observation chunk reassembly, without gRPC
FUZZ_LR_OBJ := $(BUILD)/fuzz/obj/server/grpc_lerobot_msg.o $(BUILD)/fuzz/obj/gen/lerobot_services.pb-c.o \
               $(BUILD)/fuzz/obj/base/err.o
$(BUILD)/fuzz/obj/server/grpc_lerobot_msg.o: src/server/grpc_lerobot_msg.c src/server/grpc_lerobot.h $(SERVER_GEN)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -I$(BUILD)/gen -fsanitize=fuzzer-no-link -c $< -o $@

$(BUILD)/fuzz/obj/gen/lerobot_services.pb-c.o: $(BUILD)/gen/lerobot_services.pb-c.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -I$(BUILD)/gen -fsanitize=fuzzer-no-link -c $< -o $@

$(BUILD)/fuzz/fuzz_lr_proto: fuzz/fuzz_lr_proto.c fuzz/fuzz_common.h src/server/grpc_lerobot.h $(FUZZ_LR_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_LR_OBJ) -lprotobuf-c -o $@

# the pickle / PR #3048 reader (src/server/pickle*.c need only src/base, safetensors.c and cJSON)
FUZZ_PICKLE_OBJ := $(patsubst src/%.c,$(BUILD)/fuzz/obj/%.o,$(wildcard src/server/pickle*.c))
$(BUILD)/fuzz/fuzz_pickle: fuzz/fuzz_pickle.c fuzz/fuzz_common.h $(FUZZ_OBJ) $(FUZZ_PICKLE_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_PICKLE_OBJ) $(FUZZ_OBJ) $(FUZZ_LDLIBS) -o $@

fuzz-build: $(FUZZ_BINS)

fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	    mkdir -p $(BUILD)/fuzz/corpus/$$t; \
	    d=; [ -f fuzz/dict/$$t.dict ] && d=-dict=fuzz/dict/$$t.dict; \
	    echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
	    $(BUILD)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=20 -rss_limit_mb=4096 \
	        -print_final_stats=1 $$d -artifact_prefix=$(BUILD)/fuzz/$$t- $(BUILD)/fuzz/corpus/$$t fuzz/corpus/$$t \
	        2>$(BUILD)/fuzz/$$t.log || { tail -40 $(BUILD)/fuzz/$$t.log; exit 1; }; \
	    grep -E "^stat::number_of_executed_units|Done [0-9]+ runs" $(BUILD)/fuzz/$$t.log | tail -1; \
	done

clean:
	rm -rf build build-asan build-tsan build-aarch64 $(PY_VERSION)

.PHONY: all test check asan tsan install clean FORCE fuzz fuzz-build
