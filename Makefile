# tfm — build with GNU make. `make` builds build/tfm, build/libtfm.a and build/libtfm.so; `make help` lists
# the targets. Every core is used by default (-j$(nproc)); `make -j1` builds one file at a time.
# Variables: BUILD (output dir), CC, SAN=1 (ASan+UBSan incl. float-cast-overflow), BLAS=openblas (route tfm_gemm to OpenBLAS),
# EXCLUDE="src/x.c ..." (leave files out, e.g. while a colleague is mid-edit),
# NATIVE=1 (compile everything for this machine's CPU, -march=native: the binary may then not run on
# older CPUs). The default build targets baseline x86-64 and picks AVX2/AVX-512 kernels at run time
# (src/ops/isa.c; TFM_ISA=avx512|avx2|generic forces one).
ifeq ($(filter -j% j%,$(MAKEFLAGS)),)   # no -j given: one job per core (GNU make >= 4.3 reads this here)
  MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 1)
endif
CC      ?= gcc
BUILD   ?= build
OPT     ?= -O3 -fno-math-errno
ifeq ($(NATIVE),1)
  OPT   += -march=native
endif
CFLAGS  := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -fvisibility=hidden $(OPT) -Iinclude -Isrc $(EXTRA_CFLAGS)
LDLIBS  := -fopenmp -lm
ifeq ($(SAN),1)
  OPT     := -O1 -g -fno-omit-frame-pointer
  CFLAGS  += -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow
  LDLIBS  += -fsanitize=address,undefined,float-cast-overflow
endif
ifeq ($(BLAS),openblas)
  CFLAGS  += -DTFM_USE_OPENBLAS -I/usr/include/x86_64-linux-gnu/openblas-pthread
  LDLIBS  += -lopenblas
endif

# ---- MPI (data-parallel training across processes, docs/DISTRIBUTED.md) ----
# make MPI=1 [BUILD=build-mpi]: compile src/core/dist.c with -DTFM_MPI against Open MPI (flags from
# `mpicc --showme`, its headers as -isystem so -Werror ignores them) and build the MPI check program
# $(BUILD)/mpi/dist_check (tests/mpi/, run by tests/cli/mpi.sh). Without MPI=1 nothing here applies.
ifeq ($(MPI),1)
  MPI_INCDIRS := $(shell mpicc --showme:incdirs 2>/dev/null)
  MPI_LINK    := $(shell mpicc --showme:link 2>/dev/null)
  ifeq ($(strip $(MPI_LINK)),)
    $(error MPI=1 needs Open MPI's mpicc (Debian: apt-get install libopenmpi-dev openmpi-bin))
  endif
  CFLAGS  += -DTFM_MPI $(addprefix -isystem ,$(MPI_INCDIRS))
  LDLIBS  += $(MPI_LINK)
  MPI_BIN := $(BUILD)/mpi/dist_check $(BUILD)/mpi/train_check
all: $(MPI_BIN)
mpi-check: $(MPI_BIN)
# train_check trains a small GPT across ranks: it needs the whole library
$(BUILD)/mpi/train_check: tests/mpi/train_check.c $(BUILD)/libtfm.a
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(CFLAGS) $< $(BUILD)/libtfm.a -o $@ $(LDLIBS)
# the check program links only the core files it uses, so tests/cli/mpi.sh builds it in seconds
MPI_CHECK_OBJ := $(BUILD)/src/core/dist.o $(BUILD)/src/core/util.o $(BUILD)/src/core/cpu_quota.o
$(BUILD)/mpi/%: tests/mpi/%.c tests/unit/check.h $(MPI_CHECK_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(CFLAGS) -Itests/unit $< $(MPI_CHECK_OBJ) -o $@ $(LDLIBS)
endif
# ---- end MPI ----

# ---- tfm serve (issue 30): the HTTP layer (src/http/: GNU libmicrohttpd + cJSON) links into the tfm binary
# only, and only when pkg-config finds both (Debian: libmicrohttpd-dev libcjson-dev); without them everything
# else builds and `tfm serve` says how to get them. libtfm (with the serving engine, src/serve/) never needs them.
HTTP_PKGS := libmicrohttpd libcjson
HAVE_HTTP ?= $(shell pkg-config --exists $(HTTP_PKGS) 2>/dev/null && echo 1)
ifeq ($(HAVE_HTTP),1)
  # libmicrohttpd is loaded by tfm serve (dlopen, src/http/mhd.h): linking it would load GnuTLS at every start
  MHD_SONAME  := $(or $(shell objdump -p "$$(pkg-config --variable=libdir libmicrohttpd)/libmicrohttpd.so" 2>/dev/null | \
                   awk '$$1 == "SONAME" { print $$2 }'),libmicrohttpd.so.12)
  HTTP_CFLAGS := -DTFM_HAVE_HTTP -DTFM_MHD_SONAME='"$(MHD_SONAME)"' $(shell pkg-config --cflags $(HTTP_PKGS))
  HTTP_LIBS   := $(shell pkg-config --libs libcjson)
  HTTP_OBJ    := $(patsubst %.c,$(BUILD)/%.o,$(filter-out $(EXCLUDE),$(wildcard src/http/*.c))) $(BUILD)/src/http/page_html.o
endif

LIB_SRC  := $(filter-out src/cli/% src/http/% $(EXCLUDE),$(wildcard src/*/*.c))
CLI_SRC  := $(filter-out $(EXCLUDE),$(wildcard src/cli/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
HEADERS  := $(wildcard include/tfm/*.h src/*/*.h)

.PHONY: all test unit demo demo-mt help clean bench-bin fuzz fuzz-bin
all: $(BUILD)/tfm

help:
	@echo "tfm make targets (every core by default; BUILD=dir, CC=clang, SAN=1, NATIVE=1, BLAS=openblas, MPI=1):"
	@echo "  make              build/tfm, build/libtfm.a, build/libtfm.so"
	@echo "  make demo         train a small character-level GPT on data/demo.txt and print a sample (~1.5 min with the build)"
	@echo "  make demo-mt      train a small English->French translator on data/fra-eng-demo.tsv, translate"
	@echo "                    12 sentences, write build/demo-mt/attention.svg (~70 s)"
	@echo "  make test         every test: unit, parity, CLI, clang -Werror, short fuzzing, ASan+UBSan (~13 min)"
	@echo "  make unit         the unit-test binaries only (build/tests/test_*)"
	@echo "  make fuzz         every libFuzzer target for FUZZ_SECONDS (default 60) each (clang)"
	@echo "  make bench-bin    the benchmark programs (bench/*.c; bench/run.sh runs the comparisons)"
	@echo "  make shared       build/libtfm.so only"
	@echo "  make install      PREFIX=/usr/local (DESTDIR=...): tfm, libtfm.a/.so, headers, tfm.pc, man page"
	@echo "  make uninstall    remove exactly what install wrote"
	@echo "  make clean        remove build/ and build-*/"
	@echo "Data for the recipes: scripts/get-data.sh [DIR] (docs/DATA.md)."

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC $<"
	@$(CC) $(CFLAGS) -c $< -o $@

# Kernels for one instruction set are compiled for it; they only run where cpuid reports it.
ifneq ($(filter x86_64% i686% i386%,$(shell $(CC) -dumpmachine)),)
$(BUILD)/src/ops/kernels_avx512.o: CFLAGS += -mavx512f -mavx2 -mfma
$(BUILD)/src/ops/kernels_avx512bf16.o: CFLAGS += -mavx512f -mavx512bw -mavx512bf16 -mavx2 -mfma
$(BUILD)/src/ops/kernels_q8_avx512.o: CFLAGS += -mavx512f -mavx512bw -mavx512vnni -mavx2 -mfma
endif

$(BUILD)/libtfm.a: $(LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(BUILD)/tfm: $(CLI_OBJ) $(HTTP_OBJ) $(BUILD)/libtfm.a
	@echo "  LD $@"
	@$(CC) $(CFLAGS) $(CLI_OBJ) $(HTTP_OBJ) $(BUILD)/libtfm.a -o $@ $(LDLIBS) $(HTTP_LIBS)

$(HTTP_OBJ) $(BUILD)/src/cli/cmd_serve.o: CFLAGS += $(HTTP_CFLAGS)
# the web page of tfm serve, embedded as a byte array (od: no tool beyond coreutils)
$(BUILD)/src/http/page_html.c: src/http/page.html
	@mkdir -p $(dir $@)
	@{ echo '/* generated from src/http/page.html by the Makefile */'; echo 'const char http_page[] = {'; \
	   od -An -v -tx1 $< | sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'; echo '0};'; \
	   echo 'const unsigned long http_page_len = sizeof http_page - 1;'; } > $@
$(BUILD)/src/http/page_html.o: $(BUILD)/src/http/page_html.c
	@echo "  CC $<"
	@$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/tests/%: tests/unit/%.c tests/unit/check.h $(BUILD)/libtfm.a
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(CFLAGS) -Itests/unit $< $(BUILD)/libtfm.a -o $@ $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libtfm.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libtfm.a -o $@ $(LDLIBS)

# Fuzzing (issue 11): libFuzzer harnesses (fuzz/targets.c), built with clang + ASan/UBSan into
# $(FUZZ_BUILD). `make fuzz FUZZ_SECONDS=N` runs every target N seconds on a generated seed corpus
# (fuzz/run.sh). New target: its name here and a case in fuzz/targets.c.
FUZZ_TARGETS ?= container gpt transformer rnn bahdanau vocab text tsv parallel lmdata \
                $(if $(wildcard src/text/bpe.c),bpe) $(if $(wildcard src/core/safetensors.c),safetensors) \
                unigram gpt2bpe hfconfig $(if $(HAVE_HTTP),http)
FUZZ_SECONDS ?= 60
FUZZ_BUILD   ?= build-fuzz
FUZZ_SAN     := -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow
fuzz-bin:
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=clang OPT="-O1 -g -fno-omit-frame-pointer" \
	  EXTRA_CFLAGS="-fsanitize=fuzzer-no-link $(FUZZ_SAN)" $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz/fuzz_%) \
	  $(FUZZ_BUILD)/fuzz/make_seeds
fuzz: fuzz-bin
	@bash fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)
$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_main.c fuzz/targets.c $(BUILD)/libtfm.a
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(CFLAGS) -fsanitize=fuzzer -DFUZZ_TARGET='"$*"' fuzz/fuzz_main.c fuzz/targets.c $(BUILD)/libtfm.a \
	  -o $@ $(LDLIBS) -fsanitize=fuzzer $(FUZZ_SAN)
# tfm serve's request parsing (src/http/request.c) with cJSON: its own harness (fuzz/http_target.c)
$(BUILD)/fuzz/fuzz_http: fuzz/fuzz_main.c fuzz/http_target.c src/http/request.c src/http/request.h $(BUILD)/libtfm.a
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(CFLAGS) $(HTTP_CFLAGS) -fsanitize=fuzzer -DFUZZ_TARGET='"http"' fuzz/fuzz_main.c fuzz/http_target.c \
	  src/http/request.c $(BUILD)/libtfm.a -o $@ $(LDLIBS) $(HTTP_LIBS) -fsanitize=fuzzer $(FUZZ_SAN)
$(BUILD)/fuzz/make_seeds: fuzz/make_seeds.c $(BUILD)/libtfm.a
	@mkdir -p $(dir $@)
	@$(CC) $(CFLAGS) fuzz/make_seeds.c $(BUILD)/libtfm.a -o $@ $(LDLIBS) $(FUZZ_SAN)

$(BUILD)/tests/test_fuzz_repro: fuzz/targets.c   # it #includes the fuzz targets

unit: $(TEST_BIN)
bench-bin: $(BENCH_BIN)

# The test command: unit tests, CLI tests, a clang -Werror build, and the unit tests again under
# ASan+UBSan. Last line printed: "N passed, N failed".
test: $(BUILD)/tfm $(TEST_BIN) $(BENCH_BIN)
	@bash tests/run.sh $(BUILD) build-san

demo: $(BUILD)/tfm
	$(BUILD)/tfm train-lm --data data/demo.txt --out $(BUILD)/demo.tfm --overwrite --iters 1500 --eval-every 500 \
	  --n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12 --lr 1e-3 --min-lr 1e-4 --warmup 100
	$(BUILD)/tfm generate $(BUILD)/demo.tfm --prompt "ROMEO:" --tokens 400 --temperature 0.8 --top-k 20 --seed 1

# the translation twin of `make demo` (scripts/demo-mt.sh: Tatoeba en->fr, translations, an attention picture)
demo-mt: $(BUILD)/tfm
	@TFM=$(BUILD)/tfm bash scripts/demo-mt.sh --out $(BUILD)/demo-mt

clean:
	rm -rf build build-*

# ---------------------------------------------------------------- shared library, install, uninstall
# The version lives in include/tfm/version.h only. Library objects are compiled with -fPIC (one object
# set for libtfm.a and libtfm.so, so per-file flags apply to both); -fno-semantic-interposition keeps
# calls inside the library inlinable as without -fPIC. `make install PREFIX=... DESTDIR=...` installs
# bin/tfm (libtfm linked in statically), lib/libtfm.a, lib/libtfm.so.MAJOR.MINOR.PATCH with its soname
# link libtfm.so.MAJOR and the dev link libtfm.so, include/tfm/*.h, lib/pkgconfig/tfm.pc and
# share/man/man1/tfm.1. `make uninstall` removes exactly those files.
TFM_VERSION_PART = $(shell awk '$$2 == "TFM_VERSION_$(1)" { print $$3 }' include/tfm/version.h)
VERSION_MAJOR := $(call TFM_VERSION_PART,MAJOR)
VERSION  := $(VERSION_MAJOR).$(call TFM_VERSION_PART,MINOR).$(call TFM_VERSION_PART,PATCH)
SONAME   := libtfm.so.$(VERSION_MAJOR)
SHLIB    := $(BUILD)/libtfm.so.$(VERSION)
PREFIX   ?= /usr/local
BINDIR   ?= $(PREFIX)/bin
LIBDIR   ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR   ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INSTALL  ?= install
PUBLIC_HEADERS := $(wildcard include/tfm/*.h)

$(LIB_OBJ): CFLAGS += -fPIC -fno-semantic-interposition

$(SHLIB): $(LIB_OBJ)
	@echo "  LD $@"
	@$(CC) -shared -Wl,-soname,$(SONAME) $(LIB_OBJ) -o $@ $(LDLIBS)
	@ln -sf $(notdir $@) $(BUILD)/$(SONAME)
	@ln -sf $(SONAME) $(BUILD)/libtfm.so

$(BUILD)/tfm.pc: tfm.pc.in include/tfm/version.h
	@sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|' \
	  -e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|' -e 's|@VERSION@|$(VERSION)|' $< >$@

.PHONY: shared install uninstall $(BUILD)/tfm.pc
all: $(SHLIB)
test: $(SHLIB)   # tests/cli/python.sh loads it
shared: $(SHLIB)

install: $(BUILD)/tfm $(BUILD)/libtfm.a $(SHLIB) $(BUILD)/tfm.pc
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/tfm $(DESTDIR)$(PKGCONFIGDIR) \
	  $(DESTDIR)$(MANDIR)/man1
	$(INSTALL) -m 755 $(BUILD)/tfm $(DESTDIR)$(BINDIR)/tfm
	$(INSTALL) -m 644 $(BUILD)/libtfm.a $(DESTDIR)$(LIBDIR)/libtfm.a
	$(INSTALL) -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/$(notdir $(SHLIB))
	ln -sf $(notdir $(SHLIB)) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libtfm.so
	$(INSTALL) -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(INCLUDEDIR)/tfm/
	$(INSTALL) -m 644 $(BUILD)/tfm.pc $(DESTDIR)$(PKGCONFIGDIR)/tfm.pc
	$(INSTALL) -m 644 man/tfm.1 $(DESTDIR)$(MANDIR)/man1/tfm.1

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/tfm $(DESTDIR)$(LIBDIR)/libtfm.a $(DESTDIR)$(LIBDIR)/$(notdir $(SHLIB)) \
	  $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libtfm.so $(DESTDIR)$(PKGCONFIGDIR)/tfm.pc \
	  $(DESTDIR)$(MANDIR)/man1/tfm.1 $(addprefix $(DESTDIR)$(INCLUDEDIR)/tfm/,$(notdir $(PUBLIC_HEADERS)))
	rmdir $(DESTDIR)$(INCLUDEDIR)/tfm 2>/dev/null || true
