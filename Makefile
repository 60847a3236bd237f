# tfm — build with GNU make. `make` builds build/tfm and build/libtfm.a.
# Variables: BUILD (output dir), CC, SAN=1 (ASan+UBSan incl. float-cast-overflow), BLAS=openblas (route tfm_gemm to OpenBLAS),
# EXCLUDE="src/x.c ..." (leave files out, e.g. while a colleague is mid-edit).
CC      ?= gcc
BUILD   ?= build
OPT     ?= -O3 -march=native -fno-math-errno
CFLAGS  := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp $(OPT) -Iinclude -Isrc $(EXTRA_CFLAGS)
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
