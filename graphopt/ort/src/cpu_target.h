// How the CPU kernels use the instruction sets of the machine they run on, while the library
// itself is built for the x86-64 baseline (SSE2) so that it loads anywhere.
//
// The functions that loop over rows are marked GRAPHOPT_CPU_CLONES: GCC compiles each once per
// listed instruction set and picks one when the library loads (an ifunc), so AVX2/FMA and
// AVX-512 machines get 3-4x faster activations and conversions. Everything those functions call
// in their loops is GRAPHOPT_INLINE, so it is compiled into each clone; a helper left out of
// line would run its baseline code.
//
// Kernels written with explicit vectors, whose width differs per instruction set
// (cpu_norm_linear.cc), are instead compiled once per width, inside `#pragma GCC target` regions
// where GRAPHOPT_X86_MULTIVERSION is 1, and pick one at run time with __builtin_cpu_supports.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define GRAPHOPT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define GRAPHOPT_X86_MULTIVERSION 1
#else
#define GRAPHOPT_CPU_CLONES
#define GRAPHOPT_X86_MULTIVERSION 0
#endif

// GRAPHOPT_SHUFFLE(mask_type, a, b, i...): lanes i... of a and b side by side (GCC's
// __builtin_shuffle, Clang's __builtin_shufflevector; GCC has the latter only from 12).
#if defined(__clang__)
#define GRAPHOPT_SHUFFLE(mask_type, a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define GRAPHOPT_SHUFFLE(mask_type, a, b, ...) __builtin_shuffle(a, b, mask_type{__VA_ARGS__})
#endif

#if defined(__GNUC__)
#define GRAPHOPT_INLINE inline __attribute__((always_inline))
#else
#define GRAPHOPT_INLINE inline
#endif
