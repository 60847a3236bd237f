# tfm — build with GNU make. `make` builds build/tfm and build/libtfm.a.
# Variables: BUILD (output dir), CC, SAN=1 (ASan+UBSan), BLAS=openblas (route tfm_gemm to OpenBLAS),
# EXCLUDE="src/x.c ..." (leave files out, e.g. while a colleague is mid-edit).
CC      ?= gcc
BUILD   ?= build
OPT     ?= -O3 -march=native -fno-math-errno
CFLAGS  := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp $(OPT) -Iinclude -Isrc $(EXTRA_CFLAGS)
LDLIBS  := -fopenmp -lm
ifeq ($(SAN),1)
  OPT     := -O1 -g -fno-omit-frame-pointer
  CFLAGS  += -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDLIBS  += -fsanitize=address,undefined
endif
ifeq ($(BLAS),openblas)
  CFLAGS  += -DTFM_USE_OPENBLAS -I/usr/include/x86_64-linux-gnu/openblas-pthread
  LDLIBS  += -lopenblas
endif

LIB_SRC  := $(filter-out src/cli/% $(EXCLUDE),$(wildcard src/*/*.c))
CLI_SRC  := $(filter-out $(EXCLUDE),$(wildcard src/cli/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
HEADERS  := $(wildcard include/tfm/*.h src/*/*.h)

.PHONY: all test unit demo clean bench-bin
all: $(BUILD)/tfm

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC $<"
	@$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libtfm.a: $(LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(BUILD)/tfm: $(CLI_OBJ) $(BUILD)/libtfm.a
	@echo "  LD $@"
	@$(CC) $(CFLAGS) $(CLI_OBJ) $(BUILD)/libtfm.a -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c tests/unit/check.h $(BUILD)/libtfm.a
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(CFLAGS) -Itests/unit $< $(BUILD)/libtfm.a -o $@ $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libtfm.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libtfm.a -o $@ $(LDLIBS)

unit: $(TEST_BIN)
bench-bin: $(BENCH_BIN)

# The test command: unit tests, CLI tests, a clang -Werror build, and the unit tests again under
# ASan+UBSan. Last line printed: "N passed, N failed".
test: $(BUILD)/tfm $(TEST_BIN)
	@bash tests/run.sh $(BUILD) build-san

demo: $(BUILD)/tfm
	$(BUILD)/tfm train-lm --data data/demo.txt --out $(BUILD)/demo.tfm --iters 1500 --eval-every 500 \
	  --n-layer 4 --n-head 4 --n-embd 128 --block-size 64 --batch-size 12 --lr 1e-3 --min-lr 1e-4 --warmup 100
	$(BUILD)/tfm generate $(BUILD)/demo.tfm --prompt "ROMEO:" --tokens 400 --temperature 0.8 --top-k 20 --seed 1

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
