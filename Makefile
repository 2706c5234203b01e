# mact: one Makefile.
#   make            libmact.a, libmact.so, libmact_dev.a (synth, parity: development code), the CLI, tests
#   make check      the fast tier: C unit tests and the suites that need neither PyTorch nor npm
#   make test       the whole suite (README's test command)
#   make asan       the whole suite under ASan+UBSan;  make tsan: the concurrency tests under TSan
#   make install    PREFIX=/usr/local DESTDIR=  (library, headers, mact.pc, the CLI)
# The plain-C kernels build with any C11 compiler; the x86 kernels (src/kernels/x86/) are compiled only on
# x86-64, with per-function target attributes and run-time dispatch, so no -march is forced.
CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Iinclude -Isrc -pthread -fPIC
LIBCFLAGS = -fvisibility=hidden -DMACT_BUILD
LDLIBS  += -lcjson -lpcre2-8 -lutf8proc -lpng -ljpeg -lzip -lz -lm -pthread

VERSION := 0.2.0
SOVER   := 0
PREFIX  ?= /usr/local
DESTDIR ?=

MACHINE := $(shell $(CC) -dumpmachine)
ARCH_X86 := $(if $(filter x86_64-%,$(MACHINE)),1,)

LIB_DIRS := src/base src/io src/model src/kernels src/kernels/ref src/stages $(if $(ARCH_X86),src/kernels/x86)
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_OBJ  := $(LIB_SRC:src/%.c=$(BUILD)/obj/%.o)
DEV_SRC  := $(wildcard src/dev/*.c)
DEV_OBJ  := $(DEV_SRC:src/%.c=$(BUILD)/obj/%.o)
HDRS     := $(wildcard include/*.h src/*/*.h src/*/*/*.h)
TESTS    := $(patsubst tests/c/%.c,$(BUILD)/tests/%,$(wildcard tests/c/test_*.c)) $(BUILD)/tests/npz_roundtrip_tool

all: $(BUILD)/mact $(BUILD)/libmact.so $(TESTS)

$(BUILD)/obj/dev/%.o: src/dev/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIBCFLAGS) -c $< -o $@

$(BUILD)/libmact.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libmact_dev.a: $(DEV_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# the shared library exports only what include/ marks MACT_API
$(BUILD)/libmact.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libmact.so.$(SOVER) -Wl,--no-undefined $^ $(LDLIBS) -o $@

# the CLI: tools/mact.c dispatches to one file per front end (tools/*.c)
$(BUILD)/mact: $(wildcard tools/*.c tools/*.h) $(BUILD)/libmact_dev.a $(BUILD)/libmact.a
	$(CC) $(CFLAGS) -Itools $(wildcard tools/*.c) $(BUILD)/libmact_dev.a $(BUILD)/libmact.a $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/c/%.c tests/c/th.h $(BUILD)/libmact_dev.a $(BUILD)/libmact.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/c $< $(BUILD)/libmact_dev.a $(BUILD)/libmact.a $(LDLIBS) -o $@

test: all
	BUILD=$(BUILD) tests/run.sh

check: all
	BUILD=$(BUILD) tests/run.sh --fast

asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

tsan:
	$(MAKE) BUILD=build-tsan OPT="-O1 -g -fsanitize=thread" all
	BUILD=build-tsan TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" tests/run.sh test_concurrency

install: $(BUILD)/libmact.a $(BUILD)/libmact.so $(BUILD)/mact
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(BUILD)/libmact.a $(DESTDIR)$(PREFIX)/lib/libmact.a
	install -m 755 $(BUILD)/libmact.so $(DESTDIR)$(PREFIX)/lib/libmact.so.$(VERSION)
	ln -sf libmact.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libmact.so.$(SOVER)
	ln -sf libmact.so.$(SOVER) $(DESTDIR)$(PREFIX)/lib/libmact.so
	install -m 644 include/mact.h include/mact_stages.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(BUILD)/mact $(DESTDIR)$(PREFIX)/bin/mact
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' mact.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/mact.pc

clean:
	rm -rf build build-asan build-tsan

.PHONY: all test check asan tsan install clean
