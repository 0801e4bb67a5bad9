// Splits FusedAttention's time into its parts at BERT-L4's head shape (S128, 4 heads, d = 64, the
// projections' QKV [B, 128, 768] read in place): the whole kernel prepared through the runtime
// library's registry (float32 and float16), and the library's own pieces called in the kernel's
// order on one thread over every (batch, head) of the step: the Q·Kᵀ register tiles (K = d),
// the softmax's vmath::Max and vmath::ExpShiftedSum over each score row, the P·V tiles (K = S)
// and the 1/Σ pass over the output rows. The kernel on one thread less those parts is the Kᵀ and
// V packs and the per-item overhead. Each part is the median and minimum of `rounds` runs over the
// step, the parts and the kernel alternating, with GFLOP/s counted on the products.
//
//   INC=$(.venv/bin/python -c "import nlohmann_json; print(nlohmann_json.get_include())")
//   g++ -std=c++17 -O2 -I. -I$INC benchmarks/cc/attention_parts_timing.cc \
//       -L$BUILD/tf_popef_op/lib -Wl,-rpath,$BUILD/tf_popef_op/lib -ltfpopef_runtime -pthread -o xattn
//   TF_POPEF_NUM_THREADS=1 ./xattn [batch=8] [rounds=40] [part substring]   # and TF_POPEF_NUM_THREADS=2
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/kernel.h"
#include "tf_popef_op/runtime/cc/kernels/support/packed_gemm_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace {

using tfpopef::DType;
using tfpopef::KernelContext;
using tfpopef::KernelRegistry;
using tfpopef::KernelSpec;
using tfpopef::TensorDesc;
namespace k = tfpopef::kernels;

constexpr int64_t kSeq = 128, kHeads = 4, kDim = 64, kWidth = 3 * kHeads * kDim;

struct Kernel {
  std::unique_ptr<tfpopef::Kernel> kernel;
  std::vector<unsigned char> input, output;
  void* scratch = nullptr;
  void Run() const {
    const void* in = input.data();
    void* out = const_cast<unsigned char*>(output.data());
    kernel->Run(KernelContext{&in, &out, scratch});
  }
};

Kernel Prepare(int64_t batch, DType dtype, const std::vector<float>& qkv) {
  const nlohmann::json attrs = {{"num_heads", kHeads}, {"scale", 0.125}, {"qkv_widths", {256, 256, 256}}};
  KernelSpec spec{"FusedAttention", "attention", {}, {}, tfpopef::Attrs(attrs, "attention")};
  spec.inputs.push_back(TensorDesc{dtype, {batch, kSeq, kWidth}});
  spec.outputs.push_back(TensorDesc{dtype, {batch, kSeq, kHeads * kDim}});
  Kernel p;
  p.input.resize(spec.inputs[0].nbytes());
  for (size_t i = 0; i < qkv.size(); ++i) {
    if (dtype == DType::kFloat16)
      reinterpret_cast<uint16_t*>(p.input.data())[i] = tfpopef::FloatToHalf(qkv[i]);
    else
      reinterpret_cast<float*>(p.input.data())[i] = qkv[i];
  }
  p.output.resize(spec.outputs[0].nbytes());
  p.kernel = KernelRegistry::Get().Create(spec);
  p.scratch = std::aligned_alloc(64, (std::max<size_t>(p.kernel->scratch_bytes(), 64) + 63) / 64 * 64);
  return p;
}

// The kernel's pieces on one thread, over every (batch, head) of the step, in its row blocks.
struct Parts {
  const k::PackedGemmTileFns& tiles = k::PackedGemmTiles();
  int64_t batch, row_block;
  const float* qkv;
  std::vector<float> kt, v, scores, inv_sum, y;

  Parts(int64_t b, const std::vector<float>& x) : batch(b), qkv(x.data()) {
    row_block = (32 + tiles.rows - 1) / tiles.rows * tiles.rows;
    // One packed Kᵀ and V per head (the values only set the softmax's range): scale·K's first head.
    kt.resize(kDim * kSeq);
    v.resize(kSeq * kDim);
    const int64_t pw = tiles.panel_width;
    for (int64_t j = 0; j < kSeq; ++j)
      for (int64_t p = 0; p < kDim; ++p) {
        const int64_t c0 = j / pw * pw, width = std::min(pw, kSeq - c0);
        kt[kDim * c0 + p * width + (j - c0)] = 0.125f * x[j * kWidth + 256 + p];
      }
    for (int64_t j = 0; j < kSeq; ++j)
      for (int64_t c0 = 0; c0 < kDim; c0 += pw) {
        const int64_t width = std::min(pw, kDim - c0);
        for (int64_t p = 0; p < width; ++p) v[kSeq * c0 + j * width + p] = x[j * kWidth + 512 + c0 + p];
      }
    scores.resize(row_block * kSeq);
    inv_sum.resize(row_block);
    y.resize(batch * kSeq * kHeads * kDim);
  }
  template <typename F>
  void EachBlock(F f) {
    for (int64_t bh = 0; bh < batch * kHeads; ++bh)
      for (int64_t r0 = 0; r0 < kSeq; r0 += row_block) f(bh / kHeads, bh % kHeads, r0, std::min(row_block, kSeq - r0));
  }
  void QK() {
    EachBlock([&](int64_t b, int64_t h, int64_t r0, int64_t rows) {
      const float* q = qkv + (b * kSeq + r0) * kWidth + h * kDim;
      for (int64_t c0 = 0; c0 < kSeq; c0 += tiles.panel_width) {
        const int64_t width = std::min(tiles.panel_width, kSeq - c0);
        for (int64_t r = 0; r < rows; r += tiles.rows)
          tiles.tile(std::min(tiles.rows, rows - r), width, kDim, q + r * kWidth, kWidth, kt.data() + kDim * c0, width,
                     scores.data() + r * kSeq + c0, kSeq, false, nullptr);
      }
    });
  }
  void Softmax() {
    EachBlock([&](int64_t, int64_t, int64_t, int64_t rows) {
      for (int64_t r = 0; r < rows; ++r) {
        float* row = scores.data() + r * kSeq;
        inv_sum[r] = 1.0f / k::vmath::ExpShiftedSum(row, row, kSeq, k::vmath::Max(row, kSeq));
      }
    });
  }
  void Max() {
    EachBlock([&](int64_t, int64_t, int64_t, int64_t rows) {
      for (int64_t r = 0; r < rows; ++r) inv_sum[r] = k::vmath::Max(scores.data() + r * kSeq, kSeq);
    });
  }
  void PV() {
    EachBlock([&](int64_t b, int64_t h, int64_t r0, int64_t rows) {
      float* out = y.data() + (b * kSeq + r0) * kHeads * kDim + h * kDim;
      for (int64_t r = 0; r < rows; r += tiles.rows)
        for (int64_t c0 = 0; c0 < kDim; c0 += tiles.panel_width) {
          const int64_t width = std::min(tiles.panel_width, kDim - c0);
          tiles.tile(std::min(tiles.rows, rows - r), width, kSeq, scores.data() + r * kSeq, kSeq, v.data() + kSeq * c0,
                     width, out + r * kHeads * kDim + c0, kHeads * kDim, false, nullptr);
        }
    });
  }
  void Scale() {
    EachBlock([&](int64_t b, int64_t h, int64_t r0, int64_t rows) {
      for (int64_t r = 0; r < rows; ++r) {
        float* out = y.data() + (b * kSeq + r0 + r) * kHeads * kDim + h * kDim;
        for (int64_t j = 0; j < kDim; ++j) out[j] *= inv_sum[r];
      }
    });
  }
};

double Seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 8;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 40;
  const std::string only = argc > 3 ? argv[3] : "";
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qkv(batch * kSeq * kWidth);
  for (float& x : qkv) x = normal(rng);
  const Kernel f32 = Prepare(batch, DType::kFloat32, qkv), f16 = Prepare(batch, DType::kFloat16, qkv);
  Parts parts(batch, qkv);
  const double product_flop = 2.0 * batch * kHeads * kSeq * kSeq * kDim;  // each of Q·Kᵀ and P·V
  struct Timed {
    const char* name;
    std::function<void()> run;
    double flop;
    std::vector<double> t;
  };
  std::vector<Timed> timed = {
      {"kernel fp32", [&] { f32.Run(); }, 2 * product_flop, {}},
      {"kernel fp16", [&] { f16.Run(); }, 2 * product_flop, {}},
      {"Q.K^T tiles", [&] { parts.QK(); }, product_flop, {}},
      {"softmax (Max+ExpShiftedSum)", [&] { parts.Softmax(); }, 0, {}},
      {"  Max alone", [&] { parts.Max(); }, 0, {}},
      {"P.V tiles", [&] { parts.PV(); }, product_flop, {}},
      {"1/sum pass", [&] { parts.Scale(); }, 0, {}},
  };
  timed.erase(std::remove_if(timed.begin(), timed.end(),
                             [&](const Timed& t) { return std::string(t.name).find(only) == std::string::npos; }),
              timed.end());
  for (int i = 0; i < 3; ++i)
    for (auto& t : timed) t.run();
  for (int r = 0; r < rounds; ++r)
    for (auto& t : timed) t.t.push_back(Seconds(t.run));
  std::printf("batch %lld, %s path, %d rounds; us per step (all heads of one layer)\n", static_cast<long long>(batch),
              k::vmath::SimdPathName(k::vmath::ActivePath()), rounds);
  std::printf("%-30s %10s %10s %10s\n", "part", "median", "min", "GFLOP/s");
  for (auto& t : timed) {
    std::sort(t.t.begin(), t.t.end());
    const double med = t.t[t.t.size() / 2] * 1e6, mn = t.t[0] * 1e6;
    if (t.flop > 0)
      std::printf("%-30s %10.1f %10.1f %10.1f\n", t.name, med, mn, t.flop / (mn * 1e3));
    else
      std::printf("%-30s %10.1f %10.1f\n", t.name, med, mn);
  }
  return 0;
}
