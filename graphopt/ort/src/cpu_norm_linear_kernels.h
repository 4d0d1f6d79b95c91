// NormalizeRows' and NarrowLinear's kernels for one vector width (cpu_norm_linear.cc describes
// them). No include guard: cpu_norm_linear.cc includes this once per width, GRAPHOPT_VECTOR_WIDTH
// floats a vector, each time in its own namespace and, for 8 and 16, inside a `#pragma GCC target`
// region of that instruction set. The region compiles every function here for it, helpers and
// templates included: a helper compiled for the file's baseline and only inlined into a wider
// function had its vectors built lane by lane (a broadcast became 16 masked inserts).

constexpr int W = GRAPHOPT_VECTOR_WIDTH;
typedef float V __attribute__((vector_size(W * sizeof(float))));
typedef int32_t I __attribute__((vector_size(W * sizeof(int32_t))));

// Partial-sum vectors a block of the rows kernel keeps in registers (32 vector registers with
// AVX-512, 16 otherwise). Up to kGroup outputs it takes all K at once, kAccumulators / K rows a
// block; more it takes in groups of at most kGroup, kGroupRows rows a block, so that each weight
// load serves several rows (one row a block streamed a 16 x 768 weight, 48 KB, through the cache
// for every row).
constexpr int kAccumulators = W == 16 ? 16 : 8;
constexpr int kGroupRows = W == 16 ? 4 : 2;
constexpr int kGroup = kAccumulators / kGroupRows;
// Rows the columns kernel multiplies per weight load.
constexpr int kColumnRows = W == 16 ? 8 : 4;

GRAPHOPT_INLINE V LoadV(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Within each 128-bit lane of x and y, [x0 + x1, x2 + x3, y0 + y1, y2 + y3]: shufps's two shuffles,
// which every width has in-lane.
GRAPHOPT_INLINE V PairSums(V x, V y) {
#if GRAPHOPT_VECTOR_WIDTH == 4
  return GRAPHOPT_SHUFFLE(I, x, y, 0, 2, 4, 6) + GRAPHOPT_SHUFFLE(I, x, y, 1, 3, 5, 7);
#elif GRAPHOPT_VECTOR_WIDTH == 8
  return GRAPHOPT_SHUFFLE(I, x, y, 0, 2, 8, 10, 4, 6, 12, 14) + GRAPHOPT_SHUFFLE(I, x, y, 1, 3, 9, 11, 5, 7, 13, 15);
#else
  return GRAPHOPT_SHUFFLE(I, x, y, 0, 2, 16, 18, 4, 6, 20, 22, 8, 10, 24, 26, 12, 14, 28, 30) +
         GRAPHOPT_SHUFFLE(I, x, y, 1, 3, 17, 19, 5, 7, 21, 23, 9, 11, 25, 27, 13, 15, 29, 31);
#endif
}

// Vector j of a[0..W) summed across its lanes, into lane j of the result. Each 128-bit lane first
// sums its four floats for four vectors at a time (two rounds of PairSums), then whole 128-bit lanes
// are added (vperm2f128's or vshuff32x4's halves). Every vector's sum takes the same tree.
GRAPHOPT_INLINE V Reduce(const V* a) {
  V q[W / 4];
  for (int g = 0; g < W / 4; ++g)
    q[g] = PairSums(PairSums(a[4 * g], a[4 * g + 1]), PairSums(a[4 * g + 2], a[4 * g + 3]));
#if GRAPHOPT_VECTOR_WIDTH == 4
  return q[0];
#elif GRAPHOPT_VECTOR_WIDTH == 8
  return GRAPHOPT_SHUFFLE(I, q[0], q[1], 0, 1, 2, 3, 8, 9, 10, 11) +
         GRAPHOPT_SHUFFLE(I, q[0], q[1], 4, 5, 6, 7, 12, 13, 14, 15);
#else
  // (lanes 0 + 2 and 1 + 3 of each pair of vectors, then those two)
#define GRAPHOPT_HALVES(x, y)                                                                 \
  (GRAPHOPT_SHUFFLE(I, x, y, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) + \
   GRAPHOPT_SHUFFLE(I, x, y, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31))
  const V a01 = GRAPHOPT_HALVES(q[0], q[1]);
  const V a23 = GRAPHOPT_HALVES(q[2], q[3]);
#undef GRAPHOPT_HALVES
  return GRAPHOPT_SHUFFLE(I, a01, a23, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
         GRAPHOPT_SHUFFLE(I, a01, a23, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
#endif
}

// The rows kernel on NR rows x outputs [k0, k0 + NK): out[r * k + k0 + o], r < NR, o < NK, from
// the group's weight rows and tails.
template <int NR, int NK>
GRAPHOPT_INLINE void RowDots(const Layout& l, const float* hidden, const float* weight, const float* tail, int64_t k0,
                             const float* bias, float* out) {
  V acc[NR * NK] = {};
  const int64_t full = l.d / W * W;
  for (int64_t c = 0; c < full; c += W) {
    V w[NK];
    for (int o = 0; o < NK; ++o) w[o] = LoadV(weight + o * l.d + c);
    for (int r = 0; r < NR; ++r) {
      const V h = LoadV(hidden + r * l.stride + c);
      for (int o = 0; o < NK; ++o) acc[r * NK + o] += h * w[o];
    }
  }
  if (full < l.d) {  // the last columns: the hidden row is zero past d, and so is `tail`
    for (int r = 0; r < NR; ++r) {
      const V h = LoadV(hidden + r * l.stride + full);
      for (int o = 0; o < NK; ++o) acc[r * NK + o] += h * LoadV(tail + o * W);
    }
  }
  for (int b = 0; b < NR * NK; b += W) {
    V batch[W];
    for (int j = 0; j < W; ++j) batch[j] = b + j < NR * NK ? acc[b + j] : V{};
    float sums[W];
    const V s = Reduce(batch);
    std::memcpy(sums, &s, sizeof s);
    // (the bias after the products, as the unfused graph adds it to the MatMul's result)
    for (int j = 0; j < W && b + j < NR * NK; ++j) {
      const int64_t o = k0 + (b + j) % NK;
      out[(b + j) / NK * l.k + o] = sums[j] + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

// RowDots over `rows` rows (whole register blocks: rows past `rows` pad the block, computed into
// `out` and never read) for outputs [k0, k0 + nk), nk picked at run time among NK and up, as far as
// NR x nk partial sums fit the registers.
template <int NR, int NK = 1>
GRAPHOPT_INLINE void RowGroup(int64_t nk, const Layout& l, const float* hidden, int64_t rows, const float* weight,
                              const float* tail, int64_t k0, const float* bias, float* out) {
  if constexpr (NR * NK <= kAccumulators) {
    if (nk != NK) return RowGroup<NR, NK + 1>(nk, l, hidden, rows, weight, tail, k0, bias, out);
    for (int64_t j = 0; j < rows; j += NR)
      RowDots<NR, NK>(l, hidden + j * l.stride, weight + k0 * l.d, tail + k0 * W, k0, bias, out + j * l.k);
  }
}

// K <= kGroup: one group, kAccumulators / K rows a block (K picked among NK..kGroup at run time).
template <int NK = 1>
GRAPHOPT_INLINE void OneGroup(const Layout& l, const float* hidden, int64_t rows, const float* weight,
                              const float* tail, const float* bias, float* out) {
  if constexpr (NK <= kGroup) {
    if (l.k != NK) return OneGroup<NK + 1>(l, hidden, rows, weight, tail, bias, out);
    RowGroup<kAccumulators / NK, NK>(NK, l, hidden, rows, weight, tail, 0, bias, out);
  }
}

// The columns kernel on NR rows x outputs [k0, k0 + KV * W) (those below k).
template <int NR, int KV>
GRAPHOPT_INLINE void ColumnDots(const Layout& l, const float* hidden, const float* transposed, int64_t k0,
                                const float* bias, float* out) {
  V acc[NR][KV] = {};
  for (int64_t i = 0; i < l.d; ++i) {
    V w[KV];
    for (int v = 0; v < KV; ++v) w[v] = LoadV(transposed + i * l.padded_k + k0 + v * W);
    for (int r = 0; r < NR; ++r) {
      const V h = hidden[r * l.stride + i] - V{};  // (a broadcast: x - 0 is x for every x)
      for (int v = 0; v < KV; ++v) acc[r][v] += h * w[v];
    }
  }
  for (int v = 0; v < KV; ++v) {
    const int64_t first = k0 + v * W, n = std::min<int64_t>(W, l.k - first);
    if (n == W) {  // whole vectors: the bias's, then one store a row
      const V b = bias != nullptr ? LoadV(bias + first) : V{};
      for (int r = 0; r < NR; ++r) {
        const V y = acc[r][v] + b;
        std::memcpy(out + r * l.k + first, &y, sizeof y);
      }
      continue;
    }
    for (int r = 0; r < NR; ++r) {
      float sums[W];
      const V sum = acc[r][v];  // (a copy: taking acc's address would keep it in memory)
      std::memcpy(sums, &sum, sizeof sums);
      for (int64_t j = 0; j < n; ++j) out[r * l.k + first + j] = sums[j] + (bias != nullptr ? bias[first + j] : 0.0f);
    }
  }
}

void Multiply(const Layout& l, bool columns, const float* hidden, int64_t rows, int64_t m, const float* bias,
              float* out) {
  if (!columns) {
    const float* weight = l.weight + m * l.k * l.d;
    const float* tail = l.tail + m * l.k * W;
    if (l.k <= kGroup) return OneGroup(l, hidden, rows, weight, tail, bias, out);
    // Groups as even as they go (13 outputs: 4, 3, 3, 3), so that none is a nearly empty block.
    const int64_t groups = (l.k + kGroup - 1) / kGroup;
    for (int64_t g = 0, k0 = 0; g < groups; ++g) {
      const int64_t nk = l.k / groups + (g < l.k % groups ? 1 : 0);
      RowGroup<kGroupRows>(nk, l, hidden, rows, weight, tail, k0, bias, out);
      k0 += nk;
    }
    return;
  }
  const float* transposed = l.transposed + m * l.d * l.padded_k;
  for (int64_t j = 0; j < rows; j += kColumnRows) {
    for (int64_t k0 = 0; k0 < l.k; k0 += 2 * W) {
      if (l.k - k0 > W)
        ColumnDots<kColumnRows, 2>(l, hidden + j * l.stride, transposed, k0, bias, out + j * l.k);
      else
        ColumnDots<kColumnRows, 1>(l, hidden + j * l.stride, transposed, k0, bias, out + j * l.k);
    }
  }
}

// ---- NormalizeRows ----
// A row's sums are taken in double (a float sum of values near float's top would be infinite; a
// square of a float beyond 1.8e19 is beyond float's range, and the row's variance would be
// infinite, its normalized values NaN, where the unfused norm's is finite), in four vectors of
// W / 2 doubles: 2W independent partial sums, so that no addition waits on the one before, then
// added across as a tree. The last n % W values go into one more sum. (GCC's vectorizer left
// such loops scalar, one conversion and one addition a value, once their lanes outnumbered a
// register; and its __builtin_convertvector widened eight floats in four pieces: hence the
// intrinsics.)
typedef double VD __attribute__((vector_size(W / 2 * sizeof(double))));
typedef int64_t ID __attribute__((vector_size(W / 2 * sizeof(int64_t))));

// The floats at p as doubles, the lower and upper half. (_mm512_cvtps_pd, unmasked, trips GCC 12's
// -Wmaybe-uninitialized inside its own header.)
GRAPHOPT_INLINE void Widen(const float* p, VD* low, VD* high) {
#if !defined(__SSE2__)
  for (int l = 0; l < W / 2; ++l) (*low)[l] = p[l], (*high)[l] = p[l + W / 2];
#elif GRAPHOPT_VECTOR_WIDTH == 16
  *low = _mm512_maskz_cvtps_pd(0xff, _mm256_loadu_ps(p));
  *high = _mm512_maskz_cvtps_pd(0xff, _mm256_loadu_ps(p + 8));
#elif GRAPHOPT_VECTOR_WIDTH == 8
  *low = _mm256_cvtps_pd(_mm_loadu_ps(p));
  *high = _mm256_cvtps_pd(_mm_loadu_ps(p + 4));
#else
  *low = _mm_cvtps_pd(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p))));
  *high = _mm_cvtps_pd(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p + 2))));
#endif
}

GRAPHOPT_INLINE double AddLanes(const VD* acc) {
  VD s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
#if GRAPHOPT_VECTOR_WIDTH == 16
  s += GRAPHOPT_SHUFFLE(ID, s, s, 4, 5, 6, 7, 0, 1, 2, 3);
  s += GRAPHOPT_SHUFFLE(ID, s, s, 2, 3, 0, 1, 6, 7, 4, 5);
  s += GRAPHOPT_SHUFFLE(ID, s, s, 1, 0, 3, 2, 5, 4, 7, 6);
#elif GRAPHOPT_VECTOR_WIDTH == 8
  s += GRAPHOPT_SHUFFLE(ID, s, s, 2, 3, 0, 1);
  s += GRAPHOPT_SHUFFLE(ID, s, s, 1, 0, 3, 2);
#else
  s += GRAPHOPT_SHUFFLE(ID, s, s, 1, 0);
#endif
  return s[0];
}

// What a sum reads of each value (Keep it as it is); and what it adds, in double: Value, or Square
// ((x - center)^2). Each takes a value or a vector.
struct Keep {
  static constexpr bool kWrites = false;
  GRAPHOPT_INLINE V operator()(V x) const { return x; }
  GRAPHOPT_INLINE float operator()(float x) const { return x; }
};
struct Value {
  GRAPHOPT_INLINE VD operator()(VD x) const { return x; }
  GRAPHOPT_INLINE double operator()(double x) const { return x; }
};
struct Square {
  double center;
  GRAPHOPT_INLINE VD operator()(VD x) const { return (x - center) * (x - center); }
  GRAPHOPT_INLINE double operator()(double x) const { return (x - center) * (x - center); }
};

// Adds the W values at v (read, then widened) to two of the sums.
template <class Read, class Sum>
GRAPHOPT_INLINE void SumVector(const float* v, Read, Sum add, VD* acc) {
  VD low, high;
  Widen(v, &low, &high);
  acc[0] += add(low);
  acc[1] += add(high);
}

template <class Read, class Sum>
GRAPHOPT_INLINE double SumOf(const float* v, int64_t n, Read read, Sum add) {
  VD acc[4] = {};
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    SumVector(v + i, read, add, acc);
    SumVector(v + i + W, read, add, acc + 2);
  }
  if (i + W <= n) SumVector(v + i, read, add, acc), i += W;
  double tail = 0.0;
  for (; i < n; ++i) tail += add(static_cast<double>(read(v[i])));
  return AddLanes(acc) + tail;
}

// v -= by (written back), adding the shifted values and their squares to two sums each.
GRAPHOPT_INLINE void ShiftVector(float* v, float by, VD* sums, VD* squares) {
  const V x = LoadV(v) - by;
  std::memcpy(v, &x, sizeof x);
  VD low, high;
  Widen(v, &low, &high);
  sums[0] += low, sums[1] += high;
  squares[0] += low * low, squares[1] += high * high;
}

// Layer norm's second pass: the row less its pivot, written back, and the shifted row's mean m
// and its sum of squares around m. That sum is taken as sum(d^2) - m (2 sum(d) - n m), which is
// sum((d - m)^2) expanded, from the same pass: m is the shifted row's mean, within rounding of 0, so
// the terms cancel only on a row whose values all lie within an ulp or two of their mean, whose
// variance is rounding noise either way. (A third pass over the row for the squares around m took
// a tenth of the kernel's time on rows of 32-256.)
GRAPHOPT_INLINE float ShiftSums(float* v, int64_t n, float by, double inv_n, double* around_mean) {
  VD sums[4] = {}, squares[4] = {};
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    ShiftVector(v + i, by, sums, squares);
    ShiftVector(v + i + W, by, sums + 2, squares + 2);
  }
  if (i + W <= n) ShiftVector(v + i, by, sums, squares), i += W;
  double sum_tail = 0.0, square_tail = 0.0;
  for (; i < n; ++i) {
    v[i] -= by;
    sum_tail += v[i];
    square_tail += static_cast<double>(v[i]) * v[i];
  }
  const double sum = AddLanes(sums) + sum_tail;
  const float mean = static_cast<float>(sum * inv_n);
  const double squared = AddLanes(squares) + square_tail - mean * (2.0 * sum - static_cast<double>(n) * mean);
  *around_mean = squared < 0.0 ? 0.0 : squared;  // (rounding's negative zeros; NaN stays NaN)
  return mean;
}

GRAPHOPT_INLINE int64_t RowOf(const RowBroadcast& b, int64_t r) {
  const int64_t block = b.inner == 1 ? r : r / b.inner;
  return block < b.groups ? block : block % b.groups;
}

// Up to kBatch rows, each step over all of them before the next: a row's steps wait on each other
// (a sum's last additions, a square root), the rows' do not, so the processor overlaps rows. Layer
// norm shifts the row by its float mean (the pivot), then takes the shifted row's mean and the sum of
// squares around it (ShiftSums); RMS norm centers at 0. A value near the pivot (a row with a large
// common offset, 1000 + noise) loses nothing in the difference, which is exact, and the shifted row's
// small mean corrects the pivot's rounding without shifting every value by it. (A shift by the first
// element rounded every difference twice where that element is far from the rest.)
constexpr int64_t kBatch = 16;

template <class T>
GRAPHOPT_INLINE void NormalizeBatch(const NormRows& p, int64_t r0, int64_t n, float* out, int64_t stride) {
  const int64_t cols = p.cols;
  // (a product by 1 / n, not a quotient, whose latency showed in every row's profile: the two differ
  // by at most an ulp of the double, so the floats they round to differ only at a rounding boundary)
  const double inv_count = 1.0 / static_cast<double>(cols);
  const bool layer = p.norm == Norm::kLayer;
  float means[kBatch], rstds[kBatch];
  for (int64_t j = 0; j < n; ++j) {
    const int64_t r = r0 + j;
    float* v = out + j * stride;
    Load(static_cast<const T*>(p.x) + r * cols, v, cols);
    if (p.residual != nullptr) {
      // The sum is rounded to the storage type before the norm sees it, as the unfused graph
      // stores it (see NormActCpu).
      const int64_t residual_row = p.residual_rows.groups == 0 ? r : RowOf(p.residual_rows, r);
      Add(static_cast<const T*>(p.residual) + residual_row * cols, v, cols);
      Round<T>(v, cols);
      if (p.residual_sum != nullptr) Store(v, static_cast<T*>(p.residual_sum) + r * cols, cols);
    }
    if (layer) means[j] = static_cast<float>(SumOf(v, cols, Keep{}, Value{}) * inv_count);  // (the pivot)
  }
  double squares[kBatch];
  for (int64_t j = 0; j < n; ++j) {
    if (layer)
      means[j] = ShiftSums(out + j * stride, cols, means[j], inv_count, &squares[j]);
    else  // (RMS norm: the squares around 0)
      means[j] = 0.0f, squares[j] = SumOf(out + j * stride, cols, Keep{}, Square{0.0});
  }
  const float inv_n = 1.0f / static_cast<float>(cols);
  for (int64_t j = 0; j < n; ++j) rstds[j] = static_cast<float>(1.0 / std::sqrt(squares[j] * inv_n + p.epsilon));
  RowNorm rn{p.norm, p.epsilon, p.scale, p.bias, p.activation};
  for (int64_t j = 0; j < n; ++j) {
    const int64_t r = r0 + j;
    if (p.scale != nullptr && p.scale_rows.groups != 1) rn.scale = p.scale + RowOf(p.scale_rows, r) * cols;
    if (p.bias != nullptr && p.bias_rows.groups != 1) rn.bias = p.bias + RowOf(p.bias_rows, r) * cols;
    float* v = out + j * stride;
    AffineActivate(rn, v, cols, means[j], rstds[j]);
    for (int64_t i = cols; i < stride; ++i) v[i] = 0.0f;
  }
}

template <class T>
GRAPHOPT_INLINE void NormalizeRowsOf(const NormRows& p, int64_t r0, int64_t n, float* out, int64_t stride) {
  for (int64_t j = 0; j < n; j += kBatch)
    NormalizeBatch<T>(p, r0 + j, std::min(kBatch, n - j), out + j * stride, stride);
}

void Normalize(const NormRows& p, int64_t r0, int64_t n, float* out, int64_t stride) {
  switch (p.dtype) {
    case DType::kFloat32:
      return NormalizeRowsOf<float>(p, r0, n, out, stride);
    case DType::kFloat16:
      return NormalizeRowsOf<Half>(p, r0, n, out, stride);
    case DType::kBFloat16:
      return NormalizeRowsOf<BFloat16>(p, r0, n, out, stride);
  }
}
