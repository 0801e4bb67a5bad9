// Times the memory-bound steps around the transformer GEMMs (LayerNormalization, FusedAttention,
// Softmax) in float32 and in float16 on the same shapes, the two alternating call by call in one
// process, so the machine's load falls on both alike. Kernels are prepared through the runtime
// library's registry (as a loaded PopEF's steps are), so linking one build's library or another's
// compares builds too. Shapes: BERT-L4 (S128, H256, 4 heads) and ViT-Tiny (S197, H192, 3 heads) at
// batch 1 and 8, ConvNeXtTiny's channels-last LayerNorms (stem and downsampling) at batch 1.
// Prints the median and minimum µs per call of each precision over the rounds, and float16's
// median over float32's.
//
//   INC=$(.venv/bin/python -c "import nlohmann_json; print(nlohmann_json.get_include())")
//   g++ -std=c++17 -O2 -I. -I$INC benchmarks/cc/transformer_precision_timing.cc \
//       -L$BUILD/tf_popef_op/lib -Wl,-rpath,$BUILD/tf_popef_op/lib -ltfpopef_runtime -pthread -o xprec
//   TF_POPEF_NUM_THREADS=2 ./xprec [rounds=200] [case substring|all]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/kernel.h"

namespace {

using tfpopef::DType;
using tfpopef::KernelContext;
using tfpopef::KernelRegistry;
using tfpopef::KernelSpec;
using tfpopef::TensorDesc;

struct Case {
  std::string name, op;
  nlohmann::json attrs;
  std::vector<std::vector<int64_t>> inputs;
  std::vector<int64_t> output;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const nlohmann::json ln = {{"axis", 1}, {"epsilon", 1e-6}, {"mean_output", 0}, {"inv_std_dev_output", 0}};
  auto layer_norm = [&](const std::string& name, int64_t rows, int64_t width) {
    cases.push_back({name, "LayerNormalization", ln, {{rows, width}, {width}, {width}}, {rows, width}});
  };
  layer_norm("LN bert b1 128x256", 128, 256);
  layer_norm("LN bert b8 1024x256", 1024, 256);
  layer_norm("LN vit b1 197x192", 197, 192);
  layer_norm("LN vit b8 1576x192", 1576, 192);
  layer_norm("LN convnext b1 3136x96", 3136, 96);
  layer_norm("LN convnext b1 784x192", 784, 192);
  layer_norm("LN convnext b1 196x384", 196, 384);
  auto attention = [&](const std::string& name, int64_t batch, int64_t seq, int64_t heads, int64_t d) {
    const nlohmann::json attrs = {{"num_heads", heads}, {"scale", 0.125}, {"qkv_widths", {heads * d, heads * d, heads * d}}};
    cases.push_back({name, "FusedAttention", attrs, {{batch, seq, 3 * heads * d}}, {batch, seq, heads * d}});
  };
  attention("attention bert b1", 1, 128, 4, 64);
  attention("attention bert b8", 8, 128, 4, 64);
  attention("attention vit b1", 1, 197, 3, 64);
  attention("attention vit b8", 8, 197, 3, 64);
  const nlohmann::json softmax = {{"axis", 1}, {"coerce_2d", 0}};
  cases.push_back({"Softmax vit 591x197", "Softmax", softmax, {{591, 197}}, {591, 197}});
  return cases;
}

struct Prepared {
  std::unique_ptr<tfpopef::Kernel> kernel;
  std::vector<std::vector<unsigned char>> inputs, outputs;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  void* scratch = nullptr;

  void Run() const {
    const KernelContext ctx{in_ptrs.data(), out_ptrs.data(), scratch};
    kernel->Run(ctx);
  }
};

Prepared Prepare(const Case& c, DType dtype) {
  KernelSpec spec{c.op, c.name, {}, {}, tfpopef::Attrs(c.attrs, c.name)};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Prepared p;
  for (const auto& shape : c.inputs) {
    spec.inputs.push_back(TensorDesc{dtype, shape});
    const int64_t n = spec.inputs.back().numel();
    p.inputs.emplace_back(spec.inputs.back().nbytes());
    for (int64_t i = 0; i < n; ++i) {
      const float v = normal(rng);
      if (dtype == DType::kFloat16)
        reinterpret_cast<uint16_t*>(p.inputs.back().data())[i] = tfpopef::FloatToHalf(v);
      else
        reinterpret_cast<float*>(p.inputs.back().data())[i] = v;
    }
  }
  spec.outputs.push_back(TensorDesc{dtype, c.output});
  p.outputs.emplace_back(spec.outputs.back().nbytes());
  p.kernel = KernelRegistry::Get().Create(spec);
  for (const auto& b : p.inputs) p.in_ptrs.push_back(b.data());
  for (auto& b : p.outputs) p.out_ptrs.push_back(b.data());
  const size_t scratch = std::max<size_t>(p.kernel->scratch_bytes(), 64);
  p.scratch = std::aligned_alloc(64, (scratch + 63) / 64 * 64);
  return p;
}

double Seconds(const Prepared& p) {
  const auto t0 = std::chrono::steady_clock::now();
  p.Run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
  const char* only = argc > 2 && std::strcmp(argv[2], "all") != 0 ? argv[2] : nullptr;
  std::printf("%-28s %12s %12s %12s %12s %9s\n", "case", "fp32 med us", "fp32 min", "fp16 med us", "fp16 min",
              "fp16/fp32");
  for (const Case& c : Cases()) {
    if (only && c.name.find(only) == std::string::npos) continue;
    const Prepared f32 = Prepare(c, DType::kFloat32), f16 = Prepare(c, DType::kFloat16);
    for (int i = 0; i < 5; ++i) {  // warm up (pool threads, first-run copies)
      f32.Run();
      f16.Run();
    }
    std::vector<double> t32, t16;
    for (int r = 0; r < rounds; ++r) {
      if (r % 2) {
        t32.push_back(Seconds(f32));
        t16.push_back(Seconds(f16));
      } else {
        t16.push_back(Seconds(f16));
        t32.push_back(Seconds(f32));
      }
    }
    std::sort(t32.begin(), t32.end());
    std::sort(t16.begin(), t16.end());
    const double m32 = t32[t32.size() / 2] * 1e6, m16 = t16[t16.size() / 2] * 1e6;
    std::printf("%-28s %12.1f %12.1f %12.1f %12.1f %9.3f\n", c.name.c_str(), m32, t32[0] * 1e6, m16, t16[0] * 1e6,
                m16 / m32);
    std::free(f32.scratch);
    std::free(f16.scratch);
  }
  return 0;
}
