// The table of ahead-of-time compiled kernels (op codes: KernelOp in the generated fused_enums.h),
// generated at build time by
// `python -m graphopt.kernels.aot` (gen/kernel_images.cc). The launch rule is data: per op, part and
// dtype, variants are listed in rule order and a launch takes the first whose min_cols and max_cols
// admit the row length (an exact variant's max_cols equals it), whose max_rows admits the row count,
// whose min_channel admits the channel length and whose alignment requirement the arguments meet (graphopt/kernels/launch_rules.py).
#pragma once

#include <cstddef>
#include <cstdint>

#include "fused_enums.h"

namespace graphopt::cuda {

struct KernelImage {
  int32_t arch;  // compute capability as major * 10 + minor (90 = sm_90); 0 for PTX
  const unsigned char* data;
  size_t size;
  int32_t shared_bytes;  // dynamic shared memory per program
};

struct KernelVariant {
  KernelOp op;
  const char* part;  // which of the op's kernels ("" for its only or main one)
  DType dtype;
  int64_t max_cols;
  int64_t min_cols;
  int64_t max_rows;
  int32_t block_m;  // rows per block
  int32_t iters;  // blocks per program: the grid is ceil(rows / (block_m * iters))
  int32_t block_n;
  int32_t num_warps;
  int32_t max_chunks;  // split kernels: the most chunks (one program each) a row is cut into
  bool looped;
  bool aligned;  // assumes 16-byte aligned pointers and row lengths that are multiples of 16
  bool exact;  // serves only rows of exactly max_cols elements
  bool shared;  // serves only launches whose operands every row shares (all group counts 1)
  bool blockwise;  // serves only launches whose blocks of block_m rows each read one row of every operand
  // Serves only launches of exactly this many outputs (NormActLinear's K), a constant compiled into the
  // kernel (which still takes the argument); 0: any count, taken at run time.
  int32_t out_features;
  int64_t min_channel;  // serves only launches whose channels hold at least this many elements; 0: any
  const char* entry;
  int32_t hidden_args;  // trailing scratch pointers after the declared arguments
  int64_t global_scratch_size;  // bytes per program; 0 = none
  int32_t global_scratch_align;
  int64_t profile_scratch_size;
  int32_t profile_scratch_align;
  const KernelImage* images;  // exact cubins first, PTX last
  int32_t image_count;
  const char* key;  // "op/dtype/tier", for messages
};

struct KernelTable {
  const KernelVariant* variants;
  size_t count;
  int32_t align_bytes;
  int32_t align_elements;
  const char* triton_version;
};

const KernelTable& GeneratedKernelTable();

}  // namespace graphopt::cuda
