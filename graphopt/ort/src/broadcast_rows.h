// Operands that broadcast over some leading dimensions of X, read row by row (the C++ side of
// graphopt/fused/broadcast_rows.py). X is [rows, cols]; X's row r reads the operand's row
// (r / inner) % groups of its [groups, cols]: groups = 1 is one row for all (a norm's scale),
// inner = 1 and groups = rows is X's own shape (a residual), a per-feature [N, 1, D] on [N, B, D]
// is inner = B, groups = N. Exactly the operands whose dims, right-aligned to X's, equal X's on one
// contiguous block of leading dims and are 1 elsewhere. (No ONNX Runtime headers: the CUDA
// launcher includes this too.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <string>
#include <vector>

namespace graphopt {

struct RowBroadcast {
  int64_t inner = 1;
  int64_t groups = 1;
};

// The aligned runs of rows that read one row of every operand in `operands`: 0 when every row reads the
// same ones, else the greatest common divisor of the grouped operands' `inner` (launch_rules.uniform_rows).
inline int64_t UniformRows(std::initializer_list<RowBroadcast> operands) {
  int64_t run = 0;
  for (const RowBroadcast& rows : operands) {
    if (rows.groups != 1) run = std::gcd(run, rows.inner);
  }
  return run;
}

// Sets *out to (inner, groups) of `operand` against `x` normalized over [axis, rank) and returns
// "", or returns why the operand cannot be read so.
inline std::string ReadRowBroadcast(const std::vector<int64_t>& operand, const std::vector<int64_t>& x, size_t axis,
                                    RowBroadcast* out) {
  const size_t rank = x.size(), trail = rank - axis;
  if (operand.size() > rank) return "its rank is above X's";
  if (operand.size() < trail || !std::equal(x.begin() + static_cast<std::ptrdiff_t>(axis), x.end(),
                                            operand.end() - static_cast<std::ptrdiff_t>(trail)))
    return "it must end in the normalized dims X.shape[axis:]";
  // own[i]: the operand's dim over X's leading dim i (1 where it has none).
  std::vector<int64_t> own(axis, 1);
  const size_t lead = operand.size() - trail;
  for (size_t i = 0; i < lead; ++i) own[axis - lead + i] = operand[i];
  size_t first = axis, last = 0;
  for (size_t i = 0; i < axis; ++i) {
    if (own[i] == 1) continue;
    if (own[i] != x[i]) return "it is not a broadcast of X";
    first = std::min(first, i), last = i;
  }
  *out = RowBroadcast{};
  if (first == axis) return "";
  for (size_t i = first; i <= last; ++i)
    if (own[i] != x[i]) return "it broadcasts over more than one block of X's leading dims";
  for (size_t i = last + 1; i < axis; ++i) out->inner *= x[i];
  out->groups = 1;
  for (size_t i = first; i <= last; ++i) out->groups *= x[i];
  return "";
}

}  // namespace graphopt
