# megatrain — build. `make` builds ./megatrain; `make test` runs the suite.
# CUDA=auto (default) builds the CUDA backend and the NCCL engine when nvcc is
# found; CUDA=0 builds the CPU-only binary. Objects go to $(BUILD) (build/).
# PORTABLE=1 builds without -march=native (a binary to carry to other
# machines; device code compressed). CUDA_ARCH="80 90" (default) gives SASS
# for sm_80 and sm_90 and PTX for compute_90. Every object depends on
# $(BUILD)/.flags, the compiler, flags and libraries of the last build: a
# change of CUDA=, PORTABLE= or CUDA_ARCH= rebuilds the objects, so no stale
# object (parallel/comm_nccl.c without MT_HAVE_NCCL, say) survives it.
# BUILD=build-portable BIN=build-portable/megatrain keeps a second tree
# (scripts/gpu-bundle.sh uses it).
# CUDA_EMU=1 builds the same tree with the CUDA backend and the NCCL engine
# compiled from the same sources against the host emulation of
# tests/cuda_emu/ (docs/cuda.md "Emulation"): the .cu files with the host
# C++ compiler, the CUDA runtime and cuBLAS stand-ins as
# build-emu/lib/libcudaemu.so, NCCL's as build-emu/nccl/libnccl.so.2 (put
# that folder on LD_LIBRARY_PATH); everything in build-emu/ (BIN
# build-emu/megatrain), never mixed with build/ and no nvcc needed.
# Other targets: check-layers (scripts/layers.txt), asan (ASan + UBSan build
# in build-asan/, runs the unit tests and one 2-rank parity case), clean.

CC      ?= cc
CXX     ?= g++
CUDA    ?= auto
CUDA_EMU ?= 0
ifeq ($(CUDA_EMU),1)
  BUILD ?= build-emu
  BIN   ?= $(BUILD)/megatrain
  CUDA  := emu
endif
CUDA_HOME ?= /usr/local/cuda
CUDA_ARCH ?= 80 90
NVCC    ?= $(CUDA_HOME)/bin/nvcc
PORTABLE ?= 0
ifeq ($(PORTABLE),1)
  OPT   ?= -O3
else
  OPT   ?= -O3 -march=native
endif
BUILD   ?= build
BIN     ?= megatrain
SAN     ?=
PYTHON  ?= /usr/bin/python3

ifeq ($(CUDA),auto)
  CUDA := $(shell test -x $(NVCC) && echo 1 || echo 0)
endif

MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)
# OpenBLAS through pkg-config; Debian's pthread flavour when it has no .pc file
ifeq ($(shell pkg-config --exists openblas 2>/dev/null && echo 1),1)
  BLAS_CFLAGS := $(shell pkg-config --cflags openblas)
  BLAS_LIBS   := $(shell pkg-config --libs openblas)
else
  BLAS_CFLAGS := -I/usr/include/x86_64-linux-gnu/openblas-pthread
  BLAS_LIBS   := -lopenblas
endif

CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) -g -Wall -Wextra -fopenmp -MMD -MP \
           -I. $(BLAS_CFLAGS) $(MPI_CFLAGS)
LDLIBS  += $(SAN) $(MPI_LIBS) $(BLAS_LIBS) -lcjson -lpcre2-8 -lutf8proc -lsentencepiece -ldeflate -lz \
           -lstdc++ -lm -fopenmp
CXX     ?= g++
# the one C++ file: data/sp_shim.cc, the C interface to libsentencepiece
CXXFLAGS_MT := -std=c++17 $(OPT) $(SAN) -g -Wall -Wextra -MMD -MP -I.

LIB_SRCS := $(wildcard backends/*.c core/*.c config/*.c cpu/*.c model/*.c parallel/*.c optimizer/*.c checkpoint/*.c trainer/*.c tools/*.c data/*.c planner/*.c)

CU_COMPILE = $(NVCC) $(NVFLAGS) -c -o $@ $<
ifeq ($(CUDA),emu)
  # the host emulation (tests/cuda_emu/): never part of the production build
  EMU      := tests/cuda_emu
  EMU_LIB  := $(BUILD)/lib/libcudaemu.so
  EMU_NCCL := $(BUILD)/nccl/libnccl.so.2
  EMU_OBJS := $(patsubst $(EMU)/%.cpp,$(BUILD)/emu/%.o,$(wildcard $(EMU)/emu_*.cpp))
  EMU_NCCL_OBJS := $(patsubst $(EMU)/nccl/%.cpp,$(BUILD)/emu/nccl/%.o,$(wildcard $(EMU)/nccl/*.cpp))
  EMU_CXXFLAGS := -std=c++17 -O2 -g -fPIC -Wall -Wextra -MMD -MP -I$(EMU)/include -I$(EMU) \
                  -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX $(MPI_CFLAGS)
  CFLAGS   += -DMT_HAVE_CUDA=1 -DMT_HAVE_NCCL=1 -I$(EMU)/include
  # binaries sit 0, 1 or 2 folders below $(BUILD) (megatrain, tests/, tests/tools/):
  # a location-independent run path, so a copy of the tree links the same way
  LDLIBS   := -L$(BUILD)/lib -Wl,-rpath,'$$ORIGIN/lib:$$ORIGIN/../lib:$$ORIGIN/../../lib' \
              -lcudaemu $(LDLIBS) -lstdc++ -ldl
  LIB_SRCS += $(filter-out cuda/%_nocuda.c,$(wildcard cuda/*.c))
  CU_SRCS  := $(wildcard cuda/*.cu)
  # every load/store of the .cu files calls the emulation's checks
  # (-fsanitize=kernel-address in outline mode, hooks in emu_check.cpp);
  # __CUDA_ARCH__: shared headers take their device paths
  NVFLAGS  := -x c++ -std=c++17 -O2 -g -Wall -Wextra -Wno-unknown-pragmas -MMD -MP -D__CUDA_ARCH__=900 \
              -I$(EMU)/include -I. -fsanitize=kernel-address \
              --param asan-instrumentation-with-call-threshold=0 --param asan-stack=0 \
              --param asan-globals=0
  CU_COMPILE = $(CXX) $(NVFLAGS) -c -o $@ $<
else ifeq ($(CUDA),1)
  CFLAGS   += -DMT_HAVE_CUDA=1 -DMT_HAVE_NCCL=1 -I$(CUDA_HOME)/include
  LDLIBS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lstdc++ -ldl
  LIB_SRCS += $(filter-out cuda/%_nocuda.c,$(wildcard cuda/*.c))
  CU_SRCS  := $(wildcard cuda/*.cu)
  # SASS for every arch in CUDA_ARCH, plus PTX of the newest (JIT-compiled
  # by the driver on a GPU newer than all of them)
  NVFLAGS  := -O3 -std=c++17 -I. $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
              -gencode arch=compute_$(lastword $(CUDA_ARCH)),code=compute_$(lastword $(CUDA_ARCH)) \
              -Xcompiler -Wall,-Wextra -MMD -MP
  # a carried binary: device code compressed (about 4x smaller; the
  # driver decompresses it at load)
  ifeq ($(PORTABLE),1)
    NVFLAGS += --compress-mode=size
  endif
else
  LIB_SRCS += $(wildcard cuda/*_nocuda.c)
  CU_SRCS  :=
endif

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o) $(CU_SRCS:%.cu=$(BUILD)/%.o) $(BUILD)/data/sp_shim.o
LIB      := $(BUILD)/libmegatrain.a
# code only tests and tools use (tests/support/): its own archive, linked
# into the test and tool binaries, never into ./megatrain
TLIB_SRCS := $(wildcard tests/support/*.c)
TLIB     := $(BUILD)/libmegatrain_test.a
# unit tests mirror the source: tests/unit/<folder>/test_*.c tests <folder>/
# (the shared harness headers stay in tests/unit/); each builds to
# build/tests/test_* (flat: the runner and CI name tests by binary)
TEST_SRCS := $(wildcard tests/unit/*/test_*.c tests/unit/test_*.c)
TEST_BINS := $(addprefix $(BUILD)/tests/,$(basename $(notdir $(TEST_SRCS))))
TOOL_SRCS := $(wildcard tests/tools/*.c bench/*.c)
TOOL_BINS := $(TOOL_SRCS:%.c=$(BUILD)/%)
# The unfused CUDA attention (tests/tools/cuda_ref/: the GPU reference of the
# fused op) is test code: not in the library, linked only into the two
# programs that call it, in CUDA builds (and under the emulation).
ifneq ($(filter 1 emu,$(CUDA)),)
  CUDA_REF_OBJS := $(BUILD)/tests/tools/cuda_ref/attn_unfused.o \
                   $(BUILD)/tests/tools/cuda_ref/attn_softmax.o
endif
FLAGS    := $(BUILD)/.flags
FLAGS_ID := $(subst ','\'',$(CC) $(CFLAGS) | $(NVCC) $(NVFLAGS) | $(LDLIBS) | $(CUDA))

.PHONY: all test tests clean check-layers check-dead asan docs FORCE
all: $(BIN) tests

$(BIN): $(BUILD)/main.o $(LIB) $(EMU_LIB) $(EMU_NCCL)
	$(CC) -o $@ $(BUILD)/main.o $(LIB) $(LDLIBS)

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# rewritten only when the compile/link flags differ from the last build's
$(FLAGS): FORCE
	@mkdir -p $(dir $@)
	@echo '$(FLAGS_ID)' | cmp -s - $@ || echo '$(FLAGS_ID)' > $@

$(BUILD)/%.o: %.c $(FLAGS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/%.o: %.cc $(FLAGS)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_MT) -c -o $@ $<

$(BUILD)/%.o: %.cu $(FLAGS)
	@mkdir -p $(dir $@)
	$(CU_COMPILE)

$(TLIB): $(TLIB_SRCS:%.c=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

define UNIT_TEST_RULE
$(BUILD)/tests/$(basename $(notdir $(1))): $(1) $$(TLIB) $$(LIB) $$(EMU_LIB)
	@mkdir -p $$(dir $$@)
	@mkdir -p $(BUILD)/$(dir $(1))
	$$(CC) $$(CFLAGS) -MF $(BUILD)/$(1:.c=.d) -MT $$@ -o $$@ $$< $$(TLIB) $$(LIB) $$(LDLIBS) -lcmocka
endef
$(foreach t,$(TEST_SRCS),$(eval $(call UNIT_TEST_RULE,$(t))))

$(BUILD)/tests/tools/%: tests/tools/%.c $(TLIB) $(LIB) $(EMU_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(filter %.o,$^) $(TLIB) $(LIB) $(LDLIBS) -lcmocka

$(BUILD)/bench/%: bench/%.c $(TLIB) $(LIB) $(EMU_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(filter %.o,$^) $(TLIB) $(LIB) $(LDLIBS)

$(BUILD)/tests/tools/cuda_parity $(BUILD)/bench/bench_flash_gpu: $(CUDA_REF_OBJS)

# the emulation's libraries (CUDA_EMU=1 only)
$(BUILD)/emu/emu_blas.o: EMU_OPT := -O3 -ffp-contract=off
$(BUILD)/emu/%.o: $(EMU)/%.cpp $(FLAGS)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) $(EMU_OPT) -c -o $@ $<

$(EMU_LIB): $(EMU_OBJS)
	@mkdir -p $(dir $@)
	$(CXX) -shared -o $@ $^ $(MPI_LIBS) -ldl

$(EMU_NCCL): $(EMU_NCCL_OBJS) $(EMU_LIB)
	@mkdir -p $(dir $@)
	$(CXX) -shared -Wl,-soname,libnccl.so.2 -o $@ $(EMU_NCCL_OBJS) -L$(BUILD)/lib \
	  -Wl,-rpath,'$$ORIGIN/../lib' -lcudaemu $(MPI_LIBS)

tests: $(TEST_BINS) $(TOOL_BINS)

# the test dependencies first (scripts/install-deps.sh test: cmocka, torch,
# Slurm, ...; a no-op when present), so a fresh machine needs only the
# README's two commands
test:
	bash scripts/install-deps.sh test
	$(MAKE) $(BIN) tests
	bash tests/run_tests.sh

# docs/config.md is generated from the config key table (config/config_table.c)
# and the template docs/config.md.in; tests/integration/test_config_doc.sh checks it.
docs: $(BUILD)/tests/tools/gen_config_doc
	$(BUILD)/tests/tools/gen_config_doc docs/config.md.in > docs/config.md.tmp
	mv docs/config.md.tmp docs/config.md

# every #include and cross-folder call against scripts/layers.txt
check-layers:
	$(PYTHON) scripts/check-layers.py

# every exported library function has a caller outside tests/ (dead code is
# deleted; code only tests use lives under tests/support/)
check-dead:
	$(PYTHON) scripts/check-dead.py

# ASan + UBSan, CPU only, in its own build directory; then scripts/asan-test.sh
# (./megatrain too: the parity case prepares its data with it)
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
asan: $(BIN)
	$(MAKE) CUDA=0 BUILD=build-asan BIN=build-asan/megatrain OPT=-O1 SAN="$(ASAN_FLAGS)" all
	bash scripts/asan-test.sh build-asan

clean:
	rm -rf build build-asan build-portable build-emu megatrain

# (build/tests/test_*.d: the dependency files of unit tests before they moved
# into tests/unit/<folder>/, which name sources that are gone: ignored)
-include $(filter-out $(BUILD)/tests/test_%.d,$(shell find $(BUILD) -name '*.d' 2>/dev/null))
