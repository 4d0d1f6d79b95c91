// How the CPU kernels use the instruction sets of the machine they run on, while the library
// itself is built for the x86-64 baseline (SSE2) so that it loads anywhere.
//
// The functions that loop over rows are marked GRAPHOPT_CPU_CLONES: GCC compiles each once per
// listed instruction set and picks one when the library loads (an ifunc), so AVX2/FMA and
// AVX-512 machines get 3-4x faster activations and conversions. Everything those functions call
// in their loops is GRAPHOPT_INLINE, so it is compiled into each clone; a helper left out of
// line would run its baseline code.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define GRAPHOPT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GRAPHOPT_CPU_CLONES
#endif

#if defined(__GNUC__)
#define GRAPHOPT_INLINE inline __attribute__((always_inline))
#else
#define GRAPHOPT_INLINE inline
#endif
