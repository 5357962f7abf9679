# megatrain — build. `make` builds ./megatrain; `make test` runs the suite.
# CUDA=auto (default) builds the CUDA backend and the NCCL engine when nvcc is
# found; CUDA=0 builds the CPU-only binary. Objects go to build/.

CC      ?= cc
CUDA    ?= auto
CUDA_HOME ?= /usr/local/cuda
CUDA_ARCH ?= 80 90
NVCC    ?= $(CUDA_HOME)/bin/nvcc
OPT     ?= -O3 -march=native

ifeq ($(CUDA),auto)
  CUDA := $(shell test -x $(NVCC) && echo 1 || echo 0)
endif

MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)

CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) -g -Wall -Wextra -fopenmp -MMD -MP \
           -I. -I/usr/include/x86_64-linux-gnu/openblas-pthread $(MPI_CFLAGS)
LDLIBS  += $(MPI_LIBS) -lopenblas -lcjson -lpcre2-8 -lz -lm -fopenmp

LIB_SRCS := $(wildcard backends/*.c core/*.c cpu/*.c model/*.c parallel/*.c trainer/*.c data/*.c planner/*.c)

ifeq ($(CUDA),1)
  CFLAGS   += -DMT_HAVE_CUDA=1 -DMT_HAVE_NCCL=1 -I$(CUDA_HOME)/include
  LDLIBS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lnccl -lcudart -lstdc++
  LIB_SRCS += $(filter-out cuda/%_nocuda.c,$(wildcard cuda/*.c))
  CU_SRCS  := $(wildcard cuda/*.cu)
  NVFLAGS  := -O3 -std=c++17 -I. $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
              -Xcompiler -Wall,-Wextra -MMD -MP
else
  LIB_SRCS += $(wildcard cuda/*_nocuda.c)
  CU_SRCS  :=
endif

LIB_OBJS := $(LIB_SRCS:%.c=build/%.o) $(CU_SRCS:%.cu=build/%.o)
TEST_SRCS := $(wildcard tests/unit/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/unit/%.c=build/tests/%)
TOOL_SRCS := $(wildcard tests/tools/*.c bench/*.c)
TOOL_BINS := $(TOOL_SRCS:%.c=build/%)

.PHONY: all test tests clean
all: megatrain tests

megatrain: build/main.o build/libmegatrain.a
	$(CC) -o $@ $^ $(LDLIBS)

build/libmegatrain.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

build/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

build/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c -o $@ $<

build/tests/%: tests/unit/%.c build/libmegatrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< build/libmegatrain.a $(LDLIBS) -lcmocka

build/tests/tools/%: tests/tools/%.c build/libmegatrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< build/libmegatrain.a $(LDLIBS) -lcmocka

build/bench/%: bench/%.c build/libmegatrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< build/libmegatrain.a $(LDLIBS)

tests: $(TEST_BINS) $(TOOL_BINS)

test: megatrain tests
	bash tests/run_tests.sh

clean:
	rm -rf build megatrain

-include $(shell find build -name '*.d' 2>/dev/null)
