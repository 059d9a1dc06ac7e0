# mayfly build. `make` builds build/mayflyd; `make run` and `make test` do all
# set-up on a fresh Debian 12 machine (see README.md).
#
# Three build trees: build/ (optimised), build-asan/ (the test build, with
# -fsanitize=address,undefined) and build-fuzz/ (clang-14, for the libFuzzer
# targets of fuzz/; `make fuzz`, `make fuzz-run`). Every src/**/*.c except src/server/main.c goes
# into libmayfly.a, the engine library that unit tests link against, and (in
# the release tree) libmayfly.so, which exports only the embedding API of
# include/mayfly.h: everything is compiled with -fvisibility=hidden and the
# API functions are marked MAYFLY_API. `make install` installs the libraries,
# the header and a pkg-config file (PREFIX=/usr/local, DESTDIR for staging).

CC      ?= cc
PKGS    := libbson-1.0 libuv icu-i18n icu-uc
CSTD    := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
           -fvisibility=hidden -fPIC
INCS     = -Iinclude -Isrc $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PREFIX  ?= /usr/local
VERSION := 8.0.0
LIBS     = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lstemmer -lwiredtiger -lpcre2-8 -lraft -lssl -lcrypto -lzstd -lz -lsnappy -lhttp_parser -lpthread -lquadmath -lm

BUILD   ?= build
ifeq ($(BUILD),build-asan)
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
MALLOC  :=
else ifeq ($(BUILD),build-fuzz)
# The engine instrumented for libFuzzer (coverage only: the fuzzer's main is
# linked into each target) with ASan and UBSan, compiled by $(FUZZ_CC).
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
MALLOC  :=
else
OPT     := -O2 -g
# jemalloc for the release server: about 20% faster ingest and 7% faster mass
# deletes than glibc malloc here (bench/ttl_bench.js). The test build keeps
# the sanitizer's allocator.
MALLOC  := $(shell test -e /usr/lib/x86_64-linux-gnu/libjemalloc.so -o -e /usr/lib/aarch64-linux-gnu/libjemalloc.so && echo -ljemalloc)
endif
# With jemalloc linked, code may ask it to return free pages to the OS (the
# external sorter does after each spill; src/query/agg_spill.c). It declares
# mallctl weak, so libmayfly.so still loads in a host without jemalloc.
ALLOC_DEFS := $(if $(MALLOC),-DMF_HAVE_JEMALLOC)
# main.c's malloc_conf (jemalloc's start-up options) must be in the server's
# dynamic symbol table for the shared libjemalloc to see it.
comma := ,
MALLOC_CONF_EXPORT := $(if $(MALLOC),-Wl$(comma)--export-dynamic-symbol=malloc_conf)
# The zstd block compressor for WiredTiger (ext/wt_zstd), built when libzstd's
# header is there (scripts/deps.sh installs it; probed after deps has run).
ZSTD_EXT := $(if $(wildcard /usr/include/zstd.h),$(BUILD)/libmayfly_wt_zstd.so)
CFLAGS  += $(CSTD) $(OPT) $(ALLOC_DEFS)
LDFLAGS += $(filter -fsanitize%,$(OPT))

SRCS    := $(shell find src -name '*.c' ! -path 'src/server/main.c' | sort)
# The console's page, script and style (src/http/console/) are compiled in,
# as byte arrays that scripts/embed.sh writes (the server reads no file to serve them).
CONSOLE := $(sort $(wildcard src/http/console/*))
OBJS    := $(SRCS:%.c=$(BUILD)/%.o) $(BUILD)/gen/console_assets.o
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all asan unit unit-bins unit-run deps test run clean bench install lib fuzz fuzz-bins fuzz-run
all: $(BUILD)/mayflyd $(if $(filter build-asan,$(BUILD)),,$(BUILD)/libmayfly.so $(BUILD)/storage_floor) $(ZSTD_EXT)
lib: $(BUILD)/libmayfly.a $(BUILD)/libmayfly.so

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INCS) -MMD -MP -c $< -o $@

# Decimal128 arithmetic (src/doc/dec128.c) uses C's _Decimal128, which only
# gcc has (libgcc holds the decimal routines): that file is compiled by gcc in
# every tree, in the fuzz tree without the sanitizer flags of clang's runtime.
DEC_CC  := gcc
DEC_OPT := $(if $(filter build-fuzz,$(BUILD)),-O1 -g,$(OPT))
$(BUILD)/src/doc/dec128.o: src/doc/dec128.c
	@mkdir -p $(dir $@)
	$(DEC_CC) $(CSTD) $(DEC_OPT) $(INCS) -MMD -MP -c $< -o $@

$(BUILD)/gen/console_assets.c: $(CONSOLE) scripts/embed.sh
	@mkdir -p $(dir $@)
	sh scripts/embed.sh $@ $(CONSOLE)

$(BUILD)/gen/console_assets.o: $(BUILD)/gen/console_assets.c
	$(CC) $(CFLAGS) $(INCS) -c $< -o $@

$(BUILD)/libmayfly.a: $(OBJS)
	@rm -f $@
	ar rcs $@ $^

# --exclude-libs: the static archives linked in (libgcc.a's decimal routines,
# which src/doc/dec128.c calls) stay private, as -fvisibility=hidden keeps ours.
$(BUILD)/libmayfly.so: $(OBJS)
	$(CC) -shared -Wl,-soname,libmayfly.so.8 -Wl,--exclude-libs,ALL $(LDFLAGS) -o $@ $^ $(LIBS)

# A WiredTiger extension library, loaded by WiredTiger itself: no sanitizers, only libzstd.
$(BUILD)/libmayfly_wt_zstd.so: ext/wt_zstd/wt_zstd.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) -O2 -g -fPIC -shared -fvisibility=hidden -o $@ $< -lzstd

# Regenerated every time: it names PREFIX.
.PHONY: $(BUILD)/mayfly.pc
$(BUILD)/mayfly.pc:
	@mkdir -p $(dir $@)
	@printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: mayfly\nDescription: embeddable MongoDB-compatible document engine with TTL indexes\nVersion: %s\nRequires: libbson-1.0\nLibs: -L$${libdir} -lmayfly\nLibs.private: -lstemmer -lwiredtiger -lpcre2-8 -lraft -lssl -lcrypto -lzstd -lz -lsnappy -lhttp_parser -luv -licui18n -licuuc -licudata -lpthread -lquadmath -lm\nCflags: -I$${includedir}\n' '$(PREFIX)' '$(VERSION)' > $@

install: $(BUILD)/libmayfly.a $(BUILD)/libmayfly.so $(BUILD)/mayfly.pc $(BUILD)/mayflyd
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(BUILD)/libmayfly.a $(DESTDIR)$(PREFIX)/lib/libmayfly.a
	install -m 755 $(BUILD)/libmayfly.so $(DESTDIR)$(PREFIX)/lib/libmayfly.so.$(VERSION)
	ln -sf libmayfly.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libmayfly.so.8
	ln -sf libmayfly.so.8 $(DESTDIR)$(PREFIX)/lib/libmayfly.so
	install -m 644 include/mayfly.h $(DESTDIR)$(PREFIX)/include/mayfly.h
	install -m 644 $(BUILD)/mayfly.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/mayfly.pc
	install -m 755 $(BUILD)/mayflyd $(DESTDIR)$(PREFIX)/bin/mayflyd
	$(if $(ZSTD_EXT),install -m 755 $(ZSTD_EXT) $(DESTDIR)$(PREFIX)/lib/libmayfly_wt_zstd.so)

$(BUILD)/mayflyd: $(BUILD)/src/server/main.o $(BUILD)/libmayfly.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS) -lyaml $(MALLOC) $(MALLOC_CONF_EXPORT)

# The storage layer alone doing the ingest bench's writes (bench/storage_floor.c; bench/latency_bench.js runs it).
$(BUILD)/storage_floor: bench/storage_floor.c $(BUILD)/libmayfly.a
	$(CC) $(CFLAGS) $(INCS) -o $@ $< $(BUILD)/libmayfly.a $(LDFLAGS) $(LIBS) $(MALLOC)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libmayfly.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INCS) -o $@ $< $(BUILD)/libmayfly.a $(LDFLAGS) $(LIBS) -lcriterion

asan:
	$(MAKE) BUILD=build-asan all

# Unit tests (criterion), in the sanitizer build.
unit:
	$(MAKE) BUILD=build-asan unit-run

unit-bins: $(UNIT_BINS)

unit-run: $(UNIT_BINS)
	@bash scripts/unit-run.sh $(UNIT_BINS)

deps:
	bash scripts/deps.sh

# make test / run / bench install dependencies first and only then build, in
# a sub-make: the sub-make probes for optional libraries (jemalloc) after
# scripts/deps.sh has installed them, so a fresh machine's first build is
# the same as every later one.
# The builds use every CPU (make -j); the unit suites, fuzz targets and
# client files run several at a time (scripts/unit-run.sh, fuzz-run.sh,
# test-clients.sh).
NPROC   := $(shell nproc 2>/dev/null || echo 1)

test: deps
	bash scripts/check-alloc.sh
	$(MAKE) -j$(NPROC) BUILD=build-asan all unit-bins
	$(MAKE) BUILD=build-asan unit-run
	bash scripts/test-install.sh
	$(MAKE) -j$(NPROC) fuzz
	$(MAKE) fuzz-run FUZZ_SECONDS=8
	bash scripts/test-clients.sh build-asan/mayflyd

run: deps
	$(MAKE) all
	mkdir -p data
	./build/mayflyd --port 27017 --bind_ip 127.0.0.1 --dbpath ./data

bench: deps
	$(MAKE) all
	bash bench/run.sh

# Fuzzing (fuzz/README.md): one libFuzzer binary per fuzz/fuzz_<name>.c,
# linked against the engine compiled into build-fuzz/ by clang-14 with
# -fsanitize=fuzzer-no-link,address,undefined. `make fuzz` builds them;
# `make fuzz-run FUZZ_SECONDS=N [FUZZ_TARGETS="wire bson"]` runs each for N
# seconds on its seed corpus (fuzz/corpus/<name>/) and fails on any crash,
# leak, timeout or broken invariant (the input is saved under fuzz/crashes/).
# No clang-14 is an error, never a silent skip: scripts/deps.sh installs it.
FUZZ_CC      ?= clang-14
FUZZ_TARGETS ?= wire bson match update agg keystring scram http text cmd
FUZZ_SECONDS ?= 30
FUZZ_BINS    := $(patsubst %,build-fuzz/fuzz/fuzz_%,$(FUZZ_TARGETS))

fuzz:
	@command -v $(FUZZ_CC) >/dev/null 2>&1 || { echo "fuzz: $(FUZZ_CC) not found (Debian packages clang-14 and libclang-rt-14-dev; scripts/deps.sh installs them)" >&2; exit 1; }
	@mkdir -p build-fuzz && echo '*' > build-fuzz/.gitignore
	$(MAKE) BUILD=build-fuzz CC=$(FUZZ_CC) fuzz-bins

fuzz-bins: $(FUZZ_BINS)

build-fuzz/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_common.h build-fuzz/libmayfly.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INCS) -Ifuzz -fsanitize=fuzzer,address,undefined -o $@ $< build-fuzz/libmayfly.a $(LIBS)

fuzz-run: fuzz
	bash scripts/fuzz-run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

clean:
	rm -rf build build-asan build-fuzz

-include $(OBJS:.o=.d) $(BUILD)/src/server/main.d
