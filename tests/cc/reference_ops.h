// Naive reference implementations used as oracles for the larger kernel test cases. They
// are written for obviousness, not speed: every output element is computed from its
// multi-index with the op's textbook definition (numpy broadcasting, numpy.matmul, ...), in
// double precision, sharing no code with the kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/base/half.h"

namespace tfpopef {
namespace test {

using Shape = std::vector<int64_t>;

inline int64_t NumElements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// The fused kernels' epilogue activation `name` (docs/popef.md: FusedConv's `activation` /
// `activation_params`) at x; "" is the identity, an unknown name NaN (so a case for it fails).
inline double RefActivation(const std::string& name, const std::vector<double>& params, double x) {
  auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  if (name.empty()) return x;
  if (name == "Relu") return x > 0 ? x : 0;
  if (name == "Clip") return std::min(std::max(x, params[0]), params[1]);
  if (name == "LeakyRelu") return x >= 0 ? x : params[0] * x;
  if (name == "Sigmoid") return sigmoid(x);
  if (name == "Swish") return x * sigmoid(params[0] * x);
  if (name == "HardSigmoid") return std::min(std::max(params[0] * x + params[1], 0.0), 1.0);
  if (name == "HardSwish") return x * std::min(std::max(x / 6.0 + 0.5, 0.0), 1.0);
  if (name == "GeluErf") return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  if (name == "GeluTanh") return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  if (name == "Tanh") return std::tanh(x);
  return std::nan("");
}

// Deterministic uniform values in [lo, hi).
inline std::vector<double> RandomValues(int64_t n, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

// Deterministic integers in [lo, hi], as doubles.
inline std::vector<double> RandomInts(int64_t n, int64_t lo, int64_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<double>(dist(rng));
  return v;
}

// Values as the kernel will see them once stored in a float32 / float16 tensor.
inline std::vector<double> AsFloat32(std::vector<double> v) {
  for (double& x : v) x = static_cast<float>(x);
  return v;
}
inline std::vector<double> AsFloat16(std::vector<double> v) {
  for (double& x : v) x = HalfToFloat(FloatToHalf(static_cast<float>(x)));
  return v;
}

inline Shape Unravel(int64_t flat, const Shape& shape) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

// Flat offset in `shape` of the output index `out_idx` (right-aligned, size-1 dims read at 0).
inline int64_t BroadcastOffset(const Shape& out_idx, const Shape& shape) {
  int64_t off = 0;
  const size_t lead = out_idx.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + (shape[d] == 1 ? 0 : out_idx[lead + d]);
  return off;
}

inline Shape RefBroadcastShape(const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) throw std::invalid_argument("reference: not broadcastable");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

inline std::vector<double> RefBinary(const std::vector<double>& a, const Shape& as, const std::vector<double>& b,
                                     const Shape& bs, const std::function<double(double, double)>& f) {
  const Shape out = RefBroadcastShape(as, bs);
  std::vector<double> y(NumElements(out));
  for (int64_t i = 0; i < static_cast<int64_t>(y.size()); ++i) {
    const Shape idx = Unravel(i, out);
    y[i] = f(a[BroadcastOffset(idx, as)], b[BroadcastOffset(idx, bs)]);
  }
  return y;
}

// numpy.matmul; *out_shape receives the result shape.
inline std::vector<double> RefMatMul(const std::vector<double>& a, Shape as, const std::vector<double>& b, Shape bs,
                                     Shape* out_shape) {
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  const Shape batch = RefBroadcastShape(a_batch, b_batch);
  std::vector<double> y(NumElements(batch) * m * n);
  for (int64_t t = 0; t < NumElements(batch); ++t) {
    const Shape idx = Unravel(t, batch);
    const int64_t ao = BroadcastOffset(idx, a_batch) * m * k, bo = BroadcastOffset(idx, b_batch) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += a[ao + i * k + p] * b[bo + p * n + j];
        y[t * m * n + i * n + j] = s;
      }
  }
  *out_shape = batch;
  if (!a_vec) out_shape->push_back(m);
  if (!b_vec) out_shape->push_back(n);
  return y;
}

inline std::vector<double> RefTranspose(const std::vector<double>& x, const Shape& shape, const Shape& perm,
                                        Shape* out_shape) {
  Shape out(perm.size());
  for (size_t j = 0; j < perm.size(); ++j) out[j] = shape[perm[j]];
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < static_cast<int64_t>(y.size()); ++i) {
    const Shape oidx = Unravel(i, out);
    Shape iidx(shape.size());
    for (size_t j = 0; j < perm.size(); ++j) iidx[perm[j]] = oidx[j];
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + iidx[d];
    y[i] = x[off];
  }
  *out_shape = out;
  return y;
}

// Softmax over the elements sharing every index except those in [axis, axis_end).
inline std::vector<double> RefSoftmax(const std::vector<double>& x, const Shape& shape, size_t axis, bool coerce_2d) {
  const size_t axis_end = coerce_2d ? shape.size() : axis + 1;
  std::vector<double> y(x.size());
  // Group elements by their index with dims [axis, axis_end) zeroed.
  auto group_of = [&](int64_t i) {
    Shape idx = Unravel(i, shape);
    for (size_t d = axis; d < axis_end; ++d) idx[d] = 0;
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + idx[d];
    return off;
  };
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<double> max(n, -INFINITY), sum(n, 0.0);
  for (int64_t i = 0; i < n; ++i) max[group_of(i)] = std::max(max[group_of(i)], x[i]);
  for (int64_t i = 0; i < n; ++i) sum[group_of(i)] += std::exp(x[i] - max[group_of(i)]);
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i] - max[group_of(i)]) / sum[group_of(i)];
  return y;
}

inline std::vector<double> RefConcat(const std::vector<std::vector<double>>& xs, const std::vector<Shape>& shapes,
                                     size_t axis, Shape* out_shape) {
  Shape out = shapes[0];
  out[axis] = 0;
  for (const Shape& s : shapes) out[axis] += s[axis];
  std::vector<double> y(NumElements(out));
  for (int64_t i = 0; i < static_cast<int64_t>(y.size()); ++i) {
    Shape idx = Unravel(i, out);
    size_t which = 0;
    while (idx[axis] >= shapes[which][axis]) idx[axis] -= shapes[which++][axis];
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off = off * shapes[which][d] + idx[d];
    y[i] = xs[which][off];
  }
  *out_shape = out;
  return y;
}

}  // namespace test
}  // namespace tfpopef
