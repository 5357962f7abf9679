/* tests/cuda_emu/include/cuda_emu_device.h — the device environment of the
 * host emulation, included by the stand-in cuda_runtime.h when compiled as
 * C++ (the .cu files of cuda/, built with g++ -D__CUDA_ARCH__=900 so that
 * shared headers take their device paths). What a .cu file may use:
 *   threadIdx/blockIdx/blockDim/gridDim, __syncthreads(_or/_and/_count),
 *   __syncwarp, __shfl_sync, __shfl_xor_sync, __ballot_sync, __popc,
 *   __float_as_uint/__uint_as_float, min/max, __trap, the host libm for
 *   expf/exp2f/logf/sqrtf/fmaf/sincos/pow (CUDA's own rounding of the
 *   transcendental functions is not modelled), static __shared__ arrays,
 *   MT_DYN_SMEM, MT_EMU_MMA16816 (mma.sync m16n8k16, bf16 in, fp32
 *   accumulate, from the PTX ISA fragment layout), and MT_LAUNCH.
 * Every block runs on the host, one after another; its threads are fibers
 * that switch only at a barrier or warp collective (emu_exec.cpp). Memory
 * accesses of the .cu files are instrumented (emu_check.cpp): global
 * accesses are checked against the live device allocations, shared ones by
 * the race detector, anything else in a kernel is a host pointer. */
#ifndef MT_CUDA_EMU_DEVICE_H
#define MT_CUDA_EMU_DEVICE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

#define __host__
#define __device__
#define __global__
#define __forceinline__ inline __attribute__((always_inline))
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __restrict__ __restrict
static constexpr int warpSize = 32;

namespace mt_emu {

/* ---- execution state and collectives (emu_exec.cpp) ---- */
dim3 thread_idx();
dim3 block_idx();
dim3 block_dim();
dim3 grid_dim();
void syncthreads(const char *file, int line);
/* kind 0: count, 1: or, 2: and */
int syncthreads_red(int kind, int pred, const char *file, int line);
void syncwarp(unsigned mask, const char *file, int line);
uint64_t shfl(unsigned mask, uint64_t v, int lane, int width, int is_xor, const char *file,
              int line);
unsigned ballot(unsigned mask, int pred, const char *file, int line);
void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1, const char *file,
              int line);
void *dyn_smem();
[[noreturn]] void trap(const char *file, int line);

template <typename T>
inline T shfl_sync_at(const char *file, int line, unsigned mask, T v, int src, int width = 32) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a big type");
  uint64_t b = 0;
  memcpy(&b, &v, sizeof v);
  b = shfl(mask, b, src, width, 0, file, line);
  T r;
  memcpy(&r, &b, sizeof r);
  return r;
}
template <typename T>
inline T shfl_xor_sync_at(const char *file, int line, unsigned mask, T v, int lm, int width = 32) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a big type");
  uint64_t b = 0;
  memcpy(&b, &v, sizeof v);
  b = shfl(mask, b, lm, width, 1, file, line);
  T r;
  memcpy(&r, &b, sizeof r);
  return r;
}
inline void syncwarp_at(const char *file, int line, unsigned mask = 0xffffffffu) {
  syncwarp(mask, file, line);
}

/* ---- launch (emu_exec.cpp) ---- */
struct LaunchDesc {
  const char *text;          /* the kernel argument of MT_LAUNCH, as written */
  const void *fn;            /* the kernel (named from the symbol table)      */
  void (*entry)(void *pack); /* runs the kernel on the packed arguments       */
  void (*destroy)(void *pack);
  void *pack;
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  const char *file;
  int line;
};
/* Storage for a kernel's arguments (the emulation's parameter space: a
 * region kernels may read). */
void *param_alloc(size_t bytes);
void param_free(void *p);
/* A pointer argument that is neither NULL nor device memory: fatal,
 * naming the kernel and the argument. */
void check_arg_pointer(const LaunchDesc &d, int index, const void *p);
/* Checks the configuration (cudaGetLastError reports a bad one, as CUDA's
 * launch does) and queues the kernel on its stream. */
void launch(const LaunchDesc &d);

template <typename... P> struct Pack {
  void (*fn)(P...);
  std::tuple<P...> args;
};
template <typename... P> void pack_entry(void *p) {
  Pack<P...> *pk = static_cast<Pack<P...> *>(p);
  std::apply(pk->fn, pk->args);
}
template <typename... P> void pack_destroy(void *p) {
  static_cast<Pack<P...> *>(p)->~Pack<P...>();
  param_free(p);
}
template <typename Tup, size_t... I>
void check_pointers(const LaunchDesc &d, const Tup &t, std::index_sequence<I...>) {
  (void)d, (void)t;
  (
      [&] {
        using E = std::tuple_element_t<I, Tup>;
        if constexpr (std::is_pointer<E>::value)
          check_arg_pointer(d, (int)I, (const void *)std::get<I>(t));
      }(),
      ...);
}

template <typename... P> struct Launcher {
  void (*fn)(P...);
  LaunchDesc d;
  template <typename... A> void operator()(A &&...a) const {
    static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong argument count");
    LaunchDesc x = d;
    void *mem = param_alloc(sizeof(Pack<P...>));
    Pack<P...> *pk = new (mem) Pack<P...>{fn, std::tuple<P...>(std::forward<A>(a)...)};
    x.fn = (const void *)fn;
    x.entry = &pack_entry<P...>;
    x.destroy = &pack_destroy<P...>;
    x.pack = pk;
    check_pointers(x, pk->args, std::index_sequence_for<P...>{});
    launch(x);
  }
};
template <typename... P>
Launcher<P...> launcher(void (*fn)(P...), const char *text, dim3 grid, dim3 block, size_t smem,
                        cudaStream_t st, const char *file, int line) {
  Launcher<P...> l;
  l.fn = fn;
  l.d = LaunchDesc{text, (const void *)fn, nullptr, nullptr, nullptr, grid, block, smem, st,
                   file, line};
  return l;
}

} /* namespace mt_emu */

#define threadIdx (::mt_emu::thread_idx())
#define blockIdx (::mt_emu::block_idx())
#define blockDim (::mt_emu::block_dim())
#define gridDim (::mt_emu::grid_dim())
#define __syncthreads() ::mt_emu::syncthreads(__FILE__, __LINE__)
#define __syncthreads_count(p) ::mt_emu::syncthreads_red(0, (p), __FILE__, __LINE__)
#define __syncthreads_or(p) ::mt_emu::syncthreads_red(1, (p), __FILE__, __LINE__)
#define __syncthreads_and(p) ::mt_emu::syncthreads_red(2, (p), __FILE__, __LINE__)
#define __syncwarp(...) ::mt_emu::syncwarp_at(__FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__)
#define __shfl_sync(...) ::mt_emu::shfl_sync_at(__FILE__, __LINE__, __VA_ARGS__)
#define __shfl_xor_sync(...) ::mt_emu::shfl_xor_sync_at(__FILE__, __LINE__, __VA_ARGS__)
#define __ballot_sync(m, p) ::mt_emu::ballot((m), (p), __FILE__, __LINE__)
#define __trap() ::mt_emu::trap(__FILE__, __LINE__)

#define MT_LAUNCH(kernel, grid, block, smem, stream)                                       \
  ::mt_emu::launcher(kernel, #kernel, dim3(grid), dim3(block), (size_t)(smem), (stream), \
                     __FILE__, __LINE__)
#define MT_DYN_SMEM(type, name) type *name = (type *)::mt_emu::dyn_smem()
#define MT_EMU_MMA16816(c, a, b0, b1) ::mt_emu::mma16816((c), (a), (b0), (b1), __FILE__, __LINE__)

/* vector types (CUDA's alignment: a 16-byte load is one access) */
struct __attribute__((aligned(16))) uint4 {
  unsigned x, y, z, w;
};
struct __attribute__((aligned(16))) float4 {
  float x, y, z, w;
};
struct __attribute__((aligned(8))) uint2 {
  unsigned x, y;
};
struct __attribute__((aligned(8))) float2 {
  float x, y;
};
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) {
  return uint4{a, b, c, d};
}
static inline float4 make_float4(float a, float b, float c, float d) {
  return float4{a, b, c, d};
}

static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline uint32_t __float_as_uint(float f) { return __builtin_bit_cast(uint32_t, f); }
static inline float __uint_as_float(uint32_t u) { return __builtin_bit_cast(float, u); }
static inline int __float_as_int(float f) { return __builtin_bit_cast(int, f); }
static inline float __int_as_float(int i) { return __builtin_bit_cast(float, i); }

/* CUDA's min/max: the usual arithmetic conversions, fminf/fmaxf for
 * floating types. */
template <typename A, typename B>
inline typename std::common_type<A, B>::type min(A a, B b) {
  typedef typename std::common_type<A, B>::type C;
  if constexpr (std::is_floating_point<C>::value) return fmin((C)a, (C)b);
  else return (C)a < (C)b ? (C)a : (C)b;
}
template <typename A, typename B>
inline typename std::common_type<A, B>::type max(A a, B b) {
  typedef typename std::common_type<A, B>::type C;
  if constexpr (std::is_floating_point<C>::value) return fmax((C)a, (C)b);
  else return (C)a < (C)b ? (C)b : (C)a;
}

/* The kernel-function form of cudaFuncSetAttribute. */
template <typename... P>
inline cudaError_t cudaFuncSetAttribute(void (*f)(P...), enum cudaFuncAttribute a, int v) {
  return cudaFuncSetAttribute((const void *)f, a, v);
}

#endif
