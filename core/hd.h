/* core/hd.h — MT_HD marks a small function that both backends compile from
 * one definition: __host__ __device__ (always inlined) under nvcc, a plain
 * static inline function in C. Used by core/rng.h and core/scalar_math.h. */
#ifndef MT_CORE_HD_H
#define MT_CORE_HD_H

#ifdef __CUDACC__
#define MT_HD __host__ __device__ __forceinline__
#else
#define MT_HD static inline
#endif

#endif
