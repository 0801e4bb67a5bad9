// Attention (the fused per-head softmax(scale·Q·Kᵀ)·V reading and writing [B, S, H·d]) on every
// SIMD path, float32 and float16, against a double-precision reference: BERT- and ViT-sized
// heads, more keys than one packed panel holds, value sizes that are not whole vectors, a head
// size longer than the kernel's widening buffer, a single query row and key, cross-attention
// (Sq != Sk), batch > 1, a scale other than 1; concurrent runs; bad specs. The packed form
// (one QKV [B, S, H·d + H·d + H·dv] with qkv_widths, self-attention) on the same cases.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/cc/kernel_tester.h"
#include "tests/cc/reference_ops.h"
#include "tests/cc/simd_paths.h"

namespace tfpopef {
namespace test {
namespace {

struct AttentionCase {
  int64_t b, sq, sk, h, d, dv;
  double scale;
  std::string Describe() const {
    return "attention B " + std::to_string(b) + " Sq " + std::to_string(sq) + " Sk " + std::to_string(sk) + " H " +
           std::to_string(h) + " d " + std::to_string(d) + " dv " + std::to_string(dv) + " scale " +
           std::to_string(scale);
  }
};

struct AttentionData {
  std::vector<double> q, k, v;
};

AttentionData RandomAttention(const AttentionCase& c, uint32_t seed, DType dtype) {
  auto round = dtype == F16 ? AsFloat16 : AsFloat32;
  return {round(RandomValues(c.b * c.sq * c.h * c.d, -1, 1, seed)),
          round(RandomValues(c.b * c.sk * c.h * c.d, -1, 1, seed + 1)),
          round(RandomValues(c.b * c.sk * c.h * c.dv, -2, 2, seed + 2))};
}

// softmax(scale·Q·Kᵀ)·V per (batch, head), in double, Y [B, Sq, H·dv].
std::vector<double> NaiveAttention(const AttentionCase& c, const AttentionData& x) {
  std::vector<double> y(static_cast<size_t>(c.b * c.sq * c.h * c.dv));
  std::vector<double> p(static_cast<size_t>(c.sk));
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t i = 0; i < c.sq; ++i) {
        double max = -INFINITY;
        for (int64_t j = 0; j < c.sk; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < c.d; ++e)
            dot += x.q[static_cast<size_t>(((b * c.sq + i) * c.h + h) * c.d + e)] *
                   x.k[static_cast<size_t>(((b * c.sk + j) * c.h + h) * c.d + e)];
          p[static_cast<size_t>(j)] = c.scale * dot;
          max = std::max(max, p[static_cast<size_t>(j)]);
        }
        double sum = 0;
        for (double& e : p) sum += (e = std::exp(e - max));
        for (int64_t e = 0; e < c.dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < c.sk; ++j)
            acc += p[static_cast<size_t>(j)] * x.v[static_cast<size_t>(((b * c.sk + j) * c.h + h) * c.dv + e)];
          y[static_cast<size_t>(((b * c.sq + i) * c.h + h) * c.dv + e)] = acc / sum;
        }
      }
  return y;
}

KernelTester AttentionTester(const AttentionCase& c, const AttentionData& x, DType dtype) {
  KernelTester t("FusedAttention");
  t.Attr("num_heads", c.h);
  if (c.scale != 1.0) t.Attr("scale", c.scale);
  t.AddInput(dtype, {c.b, c.sq, c.h * c.d}, x.q)
      .AddInput(dtype, {c.b, c.sk, c.h * c.d}, x.k)
      .AddInput(dtype, {c.b, c.sk, c.h * c.dv}, x.v);
  return t;
}

std::vector<AttentionCase> Cases() {
  return {
      {1, 128, 128, 4, 64, 64, 1.0},   // BERT-base-like heads, batch 1
      {2, 197, 197, 3, 64, 64, 1.0},   // ViT-Tiny's: 197 keys cross panel edges on every path
      {2, 37, 70, 2, 17, 33, 0.25},    // cross-attention, odd head and value sizes, a scale
      {1, 5, 7, 3, 5, 9, 0.3},         // fewer rows than a register tile
      {3, 1, 1, 1, 1, 1, 1.0},         // one query, one key: Y = V
      {1, 3, 4, 1, 600, 8, 0.05},      // a head longer than the widening buffer
      {1, 67, 130, 1, 8, 80, 1.0},     // one head, more values than a full AVX-512 panel
  };
}

void Label(size_t failures, const std::string& what) {
  for (size_t i = failures; i < CurrentFailures().size(); ++i) CurrentFailures()[i] = what + ": " + CurrentFailures()[i];
}

KERNEL_TEST(Attention_EveryPath_VsNaiveDouble) {
  uint32_t seed = 41000;
  ForEachSimdPath([&] {
    for (DType dtype : {F32, F16})
      for (const AttentionCase& c : Cases()) {
        const AttentionData x = RandomAttention(c, seed += 4, dtype);
        const size_t failures = CurrentFailures().size();
        // float16: Y rounded once (2^-11 relative) after float32 sums of up to 600 products
        AttentionTester(c, x, dtype)
            .AddOutput(dtype, {c.b, c.sq, c.h * c.dv}, NaiveAttention(c, x))
            .Tolerance(dtype == F16 ? 2e-3 : 2e-5, dtype == F16 ? 2e-3 : 1e-4)
            .Run();
        Label(failures, c.Describe() + (dtype == F16 ? " float16" : " float32"));
      }
  });
}

// float16 widens Q, K and V exactly and narrows Y once: on the same (float16) values its Y is the
// float32 kernel's Y rounded to nearest even, bit for bit (the register transposes of the
// float16 Kᵀ pack and the element-by-element fallback past kMaxWidenedKeyDims included).
KERNEL_TEST(Attention_Float16_EveryPath_BitIdenticalToFloat32RoundedOnce) {
  uint32_t seed = 41500;
  ForEachSimdPath([&] {
    for (const AttentionCase& c : Cases()) {
      const AttentionData x = RandomAttention(c, seed += 4, F16);
      const std::vector<double> y32 = AttentionTester(c, x, F32)
                                          .AddOutput(F32, {c.b, c.sq, c.h * c.dv}, NaiveAttention(c, x))
                                          .RunAndGetOutput(0);
      const size_t failures = CurrentFailures().size();
      AttentionTester(c, x, F16).AddOutput(F16, {c.b, c.sq, c.h * c.dv}, AsFloat16(y32)).Tolerance(0, 0).Run();
      Label(failures, c.Describe() + " float16 against float32 rounded once");
    }
  });
}

// Q, K and V side by side in one [B, S, H·d + H·d + H·dv] tensor (Sq = Sk).
std::vector<double> PackQkv(const AttentionCase& c, const AttentionData& x) {
  const int64_t wq = c.h * c.d, wv = c.h * c.dv, row = 2 * wq + wv;
  std::vector<double> qkv(static_cast<size_t>(c.b * c.sq * row));
  for (int64_t t = 0; t < c.b * c.sq; ++t) {
    double* dst = qkv.data() + t * row;
    std::copy_n(x.q.data() + t * wq, wq, dst);
    std::copy_n(x.k.data() + t * wq, wq, dst + wq);
    std::copy_n(x.v.data() + t * wv, wv, dst + 2 * wq);
  }
  return qkv;
}

KernelTester PackedAttentionTester(const AttentionCase& c, const AttentionData& x, DType dtype) {
  KernelTester t("FusedAttention");
  t.Attr("num_heads", c.h).Attr("qkv_widths", std::vector<int64_t>{c.h * c.d, c.h * c.d, c.h * c.dv});
  if (c.scale != 1.0) t.Attr("scale", c.scale);
  t.AddInput(dtype, {c.b, c.sq, c.h * (2 * c.d + c.dv)}, PackQkv(c, x));
  return t;
}

KERNEL_TEST(Attention_PackedQkv_EveryPath_VsNaiveDouble) {
  uint32_t seed = 45000;
  ForEachSimdPath([&] {
    for (DType dtype : {F32, F16})
      for (AttentionCase c : Cases()) {
        c.sk = c.sq;  // self-attention: one token axis
        const AttentionData x = RandomAttention(c, seed += 4, dtype);
        const size_t failures = CurrentFailures().size();
        PackedAttentionTester(c, x, dtype)
            .AddOutput(dtype, {c.b, c.sq, c.h * c.dv}, NaiveAttention(c, x))
            .Tolerance(dtype == F16 ? 2e-3 : 2e-5, dtype == F16 ? 2e-3 : 1e-4)
            .Run();
        Label(failures, "packed " + c.Describe() + (dtype == F16 ? " float16" : " float32"));
      }
  });
}

KERNEL_TEST(Attention_PackedQkv_BadSpecs_RaiseNamedErrors) {
  const AttentionCase c{1, 4, 4, 2, 8, 8, 1.0};
  const AttentionData x = RandomAttention(c, 46000, F32);
  const std::vector<int64_t> y = {c.b, c.sq, c.h * c.dv};
  PackedAttentionTester(c, x, F32).Attr("qkv_widths", std::vector<int64_t>{16, 16, 8})
      .AddOutput(F32, y, std::vector<double>(64))
      .ExpectError(ErrorCode::kInvalidArgument, "qkv_widths [16, 16, 8]");
  PackedAttentionTester(c, x, F32).Attr("qkv_widths", std::vector<int64_t>{16, 32})
      .AddOutput(F32, y, std::vector<double>(64))
      .ExpectError(ErrorCode::kInvalidArgument, "QKV [1, 4, 48]");
  PackedAttentionTester(c, x, F32).Attr("qkv_widths", std::vector<int64_t>{16, 8, 24})
      .AddOutput(F32, {1, 4, 24}, std::vector<double>(96))
      .ExpectError(ErrorCode::kInvalidArgument, "do not make");
  AttentionTester(c, x, F32).Attr("qkv_widths", std::vector<int64_t>{16, 16, 16})
      .AddOutput(F32, y, std::vector<double>(64))
      .ExpectError(ErrorCode::kInvalidArgument, "expects 1 inputs");
}

KERNEL_TEST(Attention_LargeScores_StayFinite) {
  // Scores of ±~200: exp would overflow without the max subtracted.
  const AttentionCase c{1, 9, 13, 2, 16, 16, 1.0};
  AttentionData x = RandomAttention(c, 42000, F32);
  for (double& e : x.q) e *= 4;
  for (double& e : x.k) e *= 4;
  AttentionTester(c, x, F32).AddOutput(F32, {c.b, c.sq, c.h * c.dv}, NaiveAttention(c, x)).Tolerance(2e-4, 2e-4).Run();
}

KERNEL_TEST(Attention_ConcurrentRuns_ShareNothing) {
  const AttentionCase c{2, 40, 40, 2, 16, 16, 1.0};
  const AttentionData x = RandomAttention(c, 43000, F32);
  AttentionTester(c, x, F32)
      .AddOutput(F32, {c.b, c.sq, c.h * c.dv}, NaiveAttention(c, x))
      .Tolerance(2e-5, 1e-4)
      .Concurrently(3, 2)
      .Run();
}

KERNEL_TEST(Attention_BadSpecs_RaiseNamedErrors) {
  const AttentionCase c{1, 4, 6, 2, 8, 8, 1.0};
  const AttentionData x = RandomAttention(c, 44000, F32);
  const std::vector<int64_t> y = {c.b, c.sq, c.h * c.dv};
  AttentionTester({1, 4, 6, 3, 8, 8, 1.0}, RandomAttention({1, 4, 6, 3, 8, 8, 1.0}, 1, F32), F32)
      .Attr("num_heads", 5)
      .AddOutput(F32, {1, 4, 24}, std::vector<double>(96))
      .ExpectError(ErrorCode::kInvalidArgument, "num_heads 5");
  AttentionTester(c, x, F32).Attr("num_heads", 0).AddOutput(F32, y, std::vector<double>(64))
      .ExpectError(ErrorCode::kInvalidArgument, "num_heads 0");
  AttentionTester(c, x, F32).Attr("scale", -1.0).AddOutput(F32, y, std::vector<double>(64))
      .ExpectError(ErrorCode::kInvalidArgument, "scale");
  AttentionTester(c, x, F32).AddOutput(F32, {1, 4, 8}, std::vector<double>(32))
      .ExpectError(ErrorCode::kInvalidArgument, "output");
  KernelTester("FusedAttention").Attr("num_heads", 1)
      .AddInput(F32, {1, 4, 8}, std::vector<double>(32))
      .AddInput(F32, {1, 0, 8}, {})
      .AddInput(F32, {1, 0, 8}, {})
      .AddOutput(F32, {1, 4, 8}, std::vector<double>(32))
      .ExpectError(ErrorCode::kInvalidArgument, "no keys");
  KernelTester("FusedAttention").Attr("num_heads", 1)
      .AddInput(F32, {4, 8}, std::vector<double>(32))
      .AddInput(F32, {4, 8}, std::vector<double>(32))
      .AddInput(F32, {4, 8}, std::vector<double>(32))
      .AddOutput(F32, {4, 8}, std::vector<double>(32))
      .ExpectError(ErrorCode::kInvalidArgument, "[B, S, heads·d]");
}

}  // namespace
}  // namespace test
}  // namespace tfpopef
