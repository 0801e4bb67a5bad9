// Depthwise convolution (group == C == M): direct loops per channel, since an im2col would be
// k× the data for what is a matrix-vector product per channel. Used by conv.cc's depthwise
// path; depthwise_conv.h says which kernel runs when.
#include "tf_popef_op/runtime/cc/kernels/conv/depthwise_conv.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace kernels {

namespace {

// One channel of a depthwise conv: y[out] = sum over the window of w[k] · x[in], accumulated
// one window tap at a time over whole output rows, so the inner loop has no bounds checks
// (the valid output range of a row is computed per tap) and is contiguous for stride 1.
inline __attribute__((always_inline)) void DepthwiseChannelBody(const SpatialGeometry& g, const float* x,
                                                                 const float* w, float* y) {
  std::fill(y, y + g.out_size(), 0.0f);
  for (int64_t kd = 0; kd < g.kernel[0]; ++kd)
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh)
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
        const float wk = w[(kd * g.kernel[1] + kh) * g.kernel[2] + kw];
        // Output columns whose input column iw = ow·stride − pad + kw·dilation is inside [0, in).
        const int64_t shift = kw * g.dilation[2] - g.pad_begin[2];
        int64_t ow_lo = shift >= 0 ? 0 : (-shift + g.stride[2] - 1) / g.stride[2];
        int64_t ow_hi = g.in[2] - shift <= 0 ? 0 : (g.in[2] - shift + g.stride[2] - 1) / g.stride[2];
        ow_hi = std::min(ow_hi, g.out[2]);
        if (ow_lo >= ow_hi) continue;
        for (int64_t od = 0; od < g.out[0]; ++od) {
          const int64_t id = od * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
          if (id < 0 || id >= g.in[0]) continue;
          for (int64_t oh = 0; oh < g.out[1]; ++oh) {
            const int64_t ih = oh * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
            if (ih < 0 || ih >= g.in[1]) continue;
            const float* row = x + (id * g.in[1] + ih) * g.in[2] + shift;
            float* yr = y + (od * g.out[1] + oh) * g.out[2];
            if (g.stride[2] == 1) {
              for (int64_t ow = ow_lo; ow < ow_hi; ++ow) yr[ow] += wk * row[ow];
            } else {
              for (int64_t ow = ow_lo; ow < ow_hi; ++ow) yr[ow] += wk * row[ow * g.stride[2]];
            }
          }
        }
      }
}

// The same loops compiled for the baseline x86-64 and for AVX2+FMA; SelectDepthwiseChannel
// picks one from vector_math.h's run-time path (TF_POPEF_SIMD), so one build runs anywhere.
void DepthwiseChannelPortable(const SpatialGeometry& g, const float* x, const float* w, float* y) {
  DepthwiseChannelBody(g, x, w, y);
}
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) void DepthwiseChannelAvx2(const SpatialGeometry& g, const float* x,
                                                              const float* w, float* y) {
  DepthwiseChannelBody(g, x, w, y);
}
#else
void DepthwiseChannelAvx2(const SpatialGeometry& g, const float* x, const float* w, float* y) {
  DepthwiseChannelBody(g, x, w, y);
}
#endif

}  // namespace

DepthwiseFn SelectDepthwiseChannel() {
  return vmath::UsesAvx2(vmath::ActivePath()) ? DepthwiseChannelAvx2 : DepthwiseChannelPortable;
}

// ================================================================ direct 3x3 / 5x5 kernel

DepthwiseDirectPlan PlanDepthwiseDirect(const SpatialGeometry& g) {
  DepthwiseDirectPlan plan;
#if defined(__x86_64__) && defined(__GNUC__)
  const bool two_d = g.in[0] == 1 && g.out[0] == 1 && g.kernel[0] == 1 && g.pad_begin[0] == 0 && g.pad_end[0] == 0;
  const int64_t k = g.kernel[1], s = g.stride[1];
  if (!two_d || g.kernel[2] != k || (k != 3 && k != 5) || g.stride[2] != s || (s != 1 && s != 2) ||
      g.dilation[1] != 1 || g.dilation[2] != 1 || g.out[1] < 1 || g.out[2] < 1 ||
      !vmath::UsesAvx2(vmath::ActivePath()))
    return plan;
  plan.usable = true;
  plan.kernel = static_cast<int>(k);
  plan.stride = static_cast<int>(s);
  const int64_t padded = g.pad_begin[2] + g.in[2] + g.pad_end[2];
  const int64_t vector_cols = (g.out[2] + 7) / 8 * 8;  // the last vector's lanes read past the row
  auto round8 = [](int64_t v) { return (v + 7) / 8 * 8; };
  // FillRow's last vector of a row may write (zeros) up to 8 columns right of the image.
  const int64_t pl = g.pad_begin[2], w = g.in[2];
  if (s == 1) {
    plan.row_floats = round8(std::max({padded, vector_cols + k - 1, pl + w + 8}));
  } else {
    // Even padded columns, then odd ones: output column ow reads tap kw at half (kw % 2),
    // index ow + kw / 2.
    plan.row_floats = 2 * round8(std::max({(padded + 1) / 2, vector_cols + k / 2, (pl + 1) / 2 + (w + 1) / 2 + 8}));
  }
  // As many output rows per strip as keep its input rows within ~16 KB (half of L1), in
  // multiples of 4 (the row blocks are 4 or 2 rows): small planes (7-28 px) are one strip,
  // so per-strip work is not repeated; 112 px rows make strips of 12-32 rows.
  constexpr int64_t kStripBytes = 16 * 1024;
  const int64_t fit_rows = (kStripBytes / static_cast<int64_t>(sizeof(float)) / plan.row_floats - k) / s + 1;
  plan.strip_rows = std::min(g.out[1], std::max<int64_t>(4, fit_rows / 4 * 4));
  plan.buffer_rows = (plan.strip_rows - 1) * s + k;
#else
  (void)g;
#endif
  return plan;
}

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

// How the registers of a finished output vector are clamped before the store.
enum class Clamp { kNone, kRelu, kClip };

struct StoreParams {
  Clamp clamp = Clamp::kNone;
  float lo = 0.0f, hi = 0.0f;
};

// kLaneMask + 8 - n: the first n lanes set (masked loads and stores of a row's last vector).
alignas(32) const int32_t kLaneMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

// The mask of the first n (0..8) lanes.
__attribute__((target("avx2,fma"), always_inline)) inline __m256i FirstLanes(int64_t n) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask + 8 - n));
}

// R output rows of one strip: y row r = sum over the K x K window of the buffer rows r·S ...
// r·S + K - 1. All R·(8-column) accumulators of a column block stay in registers while every
// input row of the block is loaded once per tap column and added to each output row it feeds.
// A row's last, partial vector is stored whole: its extra lanes land on the start of the next
// output row, which is stored later (column blocks run right to left, rows top to bottom).
// Only a store that would pass y_end (the end of the thread's planes) is masked: masked
// stores are slow on some CPUs (AMD: 3x the time of the whole 7x7 plane's kernel).
template <int K, int S, int R>
__attribute__((target("avx2,fma"))) void DirectRows(const float* buf, int64_t row_floats, const __m256* wv,
                                                    float bias_value, const StoreParams& st, float* y, int64_t ow_n,
                                                    const float* y_end) {
  constexpr int kInRows = (R - 1) * S + K;
  const int64_t half = row_floats / 2;
  const __m256 lo = _mm256_set1_ps(st.lo), hi = _mm256_set1_ps(st.hi), bias = _mm256_set1_ps(bias_value);
  for (int64_t ow = (ow_n - 1) / 8 * 8; ow >= 0; ow -= 8) {
    __m256 acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = bias;
#pragma GCC unroll 19
    for (int i = 0; i < kInRows; ++i) {
      const float* row = buf + i * row_floats + ow;
#pragma GCC unroll 5
      for (int kw = 0; kw < K; ++kw) {
        const __m256 v = _mm256_loadu_ps(S == 1 ? row + kw : row + (kw % 2) * half + kw / 2);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const int kh = i - r * S;
          if (kh >= 0 && kh < K) acc[r] = _mm256_fmadd_ps(wv[kh * K + kw], v, acc[r]);
        }
      }
    }
    const int64_t left = ow_n - ow;
    const __m256i mask = FirstLanes(std::min<int64_t>(8, left));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m256 v = acc[r];
      // Operand order keeps the epilogue's NaN rules: Relu maps NaN to 0, Clip keeps it.
      if (st.clamp == Clamp::kRelu) v = _mm256_max_ps(v, lo);
      if (st.clamp == Clamp::kClip) v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
      float* out = y + r * ow_n + ow;
      if (left >= 8 || out + 8 <= y_end) _mm256_storeu_ps(out, v);
      else _mm256_maskstore_ps(out, mask, v);
    }
  }
}

// Input row ih of plane x into buffer row `row` (zero padding kept in the untouched columns;
// rows outside the image become all zeros). Stride 2 splits the padded row p = iw + pad_left
// into its even columns (first half) and odd columns (second half).
template <int S>
__attribute__((target("avx2,fma"), always_inline)) inline void FillRow(const SpatialGeometry& g, const float* x,
                                                                       int64_t ih, float* row, int64_t row_floats) {
  const int64_t w = g.in[2], pl = g.pad_begin[2];
  if (ih < 0 || ih >= g.in[1]) {
    std::memset(row, 0, static_cast<size_t>(row_floats) * sizeof(float));
    return;
  }
  // Stride 2: x[2j] lands on padded column 2j + pl, x[2j + 1] on 2j + 1 + pl.
  const float* src = x + ih * w;
  if (S == 1) {
    // Whole vectors (small rows, 7-28 floats, would spend more in memcpy's call than in the
    // copy); the tail's load is masked (it may end the input) and so zero past the image,
    // its store is whole: it writes those zeros onto the pad columns (the plan's slack).
    float* dst = row + pl;
    int64_t iw = 0;
    for (; iw + 8 <= w; iw += 8) _mm256_storeu_ps(dst + iw, _mm256_loadu_ps(src + iw));
    if (iw < w) {
      _mm256_storeu_ps(dst + iw, _mm256_maskload_ps(src + iw, FirstLanes(w - iw)));
    }
    return;
  }
  const int64_t half = row_floats / 2;
  float* even_dst = (pl % 2 == 0 ? row : row + half) + pl / 2;
  float* odd_dst = (pl % 2 == 0 ? row + half + pl / 2 : row + (pl + 1) / 2);
  int64_t j = 0;
  for (; 2 * j + 16 <= w; j += 8) {
    const __m256 a = _mm256_loadu_ps(src + 2 * j), b = _mm256_loadu_ps(src + 2 * j + 8);
    // shuffle_ps picks within 128-bit lanes: [a0 a2 b0 b2 | a4 a6 b4 b6]; the permute restores order.
    const __m256 ev = _mm256_shuffle_ps(a, b, 0x88), od = _mm256_shuffle_ps(a, b, 0xDD);
    _mm256_storeu_ps(even_dst + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
    _mm256_storeu_ps(odd_dst + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8)));
  }
  if (2 * j < w) {  // the last 1-15 columns: masked loads (zeros past the image), whole stores
    const int64_t n = w - 2 * j;
    const __m256 a = _mm256_maskload_ps(src + 2 * j, FirstLanes(std::min<int64_t>(8, n)));
    const __m256 b = _mm256_maskload_ps(src + 2 * j + 8, FirstLanes(std::max<int64_t>(0, n - 8)));
    const __m256 ev = _mm256_shuffle_ps(a, b, 0x88), od = _mm256_shuffle_ps(a, b, 0xDD);
    _mm256_storeu_ps(even_dst + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
    _mm256_storeu_ps(odd_dst + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8)));
  }
}

template <int K, int S>
__attribute__((target("avx2,fma"))) void DirectPlanes(const DepthwiseDirectPlan& plan, const SpatialGeometry& g,
                                                      const float* x, const float* w, int64_t channels, int64_t i0,
                                                      int64_t i1, const float* bias, const Epilogue& epilogue,
                                                      const float* sum, float* y, float* scratch) {
  // Row blocks: 4 output rows at stride 1 (6 input rows feed 36 FMAs per column vector), 2 at
  // stride 2 (5 rows, 18 FMAs); 5x5 windows need more weight registers, so fewer rows.
  constexpr int kBlock = K == 3 ? (S == 1 ? 4 : 2) : 2;
  const int64_t in_size = g.in_size(), oh_n = g.out[1], ow_n = g.out[2], out_size = oh_n * ow_n;
  const int64_t rf = plan.row_floats;
  // Bias and Relu / Clip in the registers; a residual sum or another activation afterwards,
  // per strip of output rows, by the shared epilogue.
  const bool post = sum != nullptr || !(epilogue.activation == Activation::kNone ||
                                        epilogue.activation == Activation::kRelu ||
                                        epilogue.activation == Activation::kClip);
  StoreParams st;
  if (!post && epilogue.activation == Activation::kRelu) st.clamp = Clamp::kRelu;
  if (!post && epilogue.activation == Activation::kClip) {
    st.clamp = Clamp::kClip;
    st.lo = epilogue.p0;
    st.hi = epilogue.p1;
  }
  // Columns never written by FillRow are the zero padding.
  std::memset(scratch, 0, plan.scratch_floats() * sizeof(float));
  __m256 wv[K * K];
  // Spilled lanes may land on the next plane of this range (stored after this one), not past it.
  const float* y_end = y + i1 * out_size;
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t c = i % channels;
    for (int t = 0; t < K * K; ++t) wv[t] = _mm256_set1_ps(w[c * K * K + t]);
    const float bv = bias != nullptr ? bias[c] : 0.0f;
    const float* xc = x + i * in_size;
    float* yc = y + i * out_size;
    for (int64_t oh0 = 0; oh0 < oh_n; oh0 += plan.strip_rows) {
      const int64_t rows = std::min(plan.strip_rows, oh_n - oh0);
      const int64_t ih0 = oh0 * S - g.pad_begin[1];
      for (int64_t r = 0; r < (rows - 1) * S + K; ++r) FillRow<S>(g, xc, ih0 + r, scratch + r * rf, rf);
      int64_t r = 0;
      for (; r + kBlock <= rows; r += kBlock)
        DirectRows<K, S, kBlock>(scratch + r * S * rf, rf, wv, bv, st, yc + (oh0 + r) * ow_n, ow_n, y_end);
      // The rest of the strip (planes of 7 or 14 rows): a 2-row block still shares input rows.
      if (kBlock > 2 && r + 2 <= rows) {
        DirectRows<K, S, 2>(scratch + r * S * rf, rf, wv, bv, st, yc + (oh0 + r) * ow_n, ow_n, y_end);
        r += 2;
      }
      for (; r < rows; ++r) DirectRows<K, S, 1>(scratch + r * S * rf, rf, wv, bv, st, yc + (oh0 + r) * ow_n, ow_n, y_end);
      if (post) {
        const int64_t off = oh0 * ow_n;
        epilogue.Apply(yc + off, rows * ow_n, 0.0f, nullptr, sum != nullptr ? sum + i * out_size + off : nullptr);
      }
    }
  }
}

}  // namespace

void RunDepthwiseDirect(const DepthwiseDirectPlan& plan, const SpatialGeometry& g, const float* x, const float* w,
                        int64_t channels, int64_t i0, int64_t i1, const float* bias, const Epilogue& epilogue,
                        const float* sum, float* y, float* scratch) {
  using PlanesFn = void (*)(const DepthwiseDirectPlan&, const SpatialGeometry&, const float*, const float*, int64_t,
                           int64_t, int64_t, const float*, const Epilogue&, const float*, float*, float*);
  const PlanesFn run = plan.kernel == 3 ? (plan.stride == 1 ? &DirectPlanes<3, 1> : &DirectPlanes<3, 2>)
                                        : (plan.stride == 1 ? &DirectPlanes<5, 1> : &DirectPlanes<5, 2>);
  run(plan, g, x, w, channels, i0, i1, bias, epilogue, sum, y, scratch);
}
#else
void RunDepthwiseDirect(const DepthwiseDirectPlan&, const SpatialGeometry&, const float*, const float*, int64_t,
                        int64_t, int64_t, const float*, const Epilogue&, const float*, float*, float*) {
  throw Error(ErrorCode::kInternal, "RunDepthwiseDirect: the direct depthwise kernel needs x86-64 AVX2");
}
#endif

}  // namespace kernels
}  // namespace tfpopef
