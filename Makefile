# mact: one Makefile. `make` builds libmact.a and the mact CLI; `make test` runs the suite;
# `make asan` runs the suite under ASan+UBSan.
CC      ?= cc
BUILD   ?= build
OPT     ?= -O2 -march=x86-64-v2 -mtune=native
CFLAGS  ?= $(OPT) -g
CFLAGS  += -fopenmp -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Iinclude -Isrc -pthread
LDLIBS  += -lcjson -lpcre2-8 -lutf8proc -lpng -ljpeg -lz -lm -fopenmp -pthread

SRC     := $(wildcard src/*.c)
OBJ     := $(SRC:src/%.c=$(BUILD)/obj/%.o)
TESTS   := $(patsubst tests/c/%.c,$(BUILD)/tests/%,$(wildcard tests/c/test_*.c))

all: $(BUILD)/mact $(TESTS)

$(BUILD)/obj/%.o: src/%.c $(wildcard src/*.h include/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libmact.a: $(OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# the CLI: tools/mact.c dispatches to one file per front end (tools/*.c)
$(BUILD)/mact: $(wildcard tools/*.c tools/*.h) $(BUILD)/libmact.a
	$(CC) $(CFLAGS) -Itools $(wildcard tools/*.c) $(BUILD)/libmact.a $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/c/%.c tests/c/th.h $(BUILD)/libmact.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/c $< $(BUILD)/libmact.a $(LDLIBS) -o $@

test: all
	BUILD=$(BUILD) tests/run.sh

asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

clean:
	rm -rf build build-asan

.PHONY: all test asan clean
