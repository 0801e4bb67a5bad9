// Times the NCHWc depthwise row function (kernels/nchwc/nchwc_depthwise_tiles.inc) over whole
// layers of EfficientNetB0, ConvNeXtTiny and MobileNetV2 (224 input), one thread, on the
// AVX-512 build of the tiles; bias + Relu (or the swish) in registers; best of `reps` passes per
// layer; a last argument keeps only the layers whose name contains it.
// Build against a checkout's sources, or against another build's object of the tiles to time
// that build (e.g. main's CMake object), then run the two binaries alternately:
//
//   INC=$(.venv/bin/python -c "import nlohmann_json; print(nlohmann_json.get_include())")
//   K=tf_popef_op/runtime/cc/kernels
//   g++ -std=c++17 -O3 -I. -I$INC -pthread benchmarks/cc/nchwc_depthwise_timing.cc \
//       $K/nchwc/nchwc_tiles_avx512.cc $K/support/vector_math.cc $K/support/vector_math_avx2.cc \
//       $K/support/vector_math_avx512.cc $K/support/fp16_convert.cc -o dw_new
//   ./dw_new [batch=1] [reps=5] [f32|f16] [relu|swish] [layer name part, e.g. "32@112"]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.h"

namespace {

struct Layer {
  const char* name;
  int c, hw, k, stride, pad_begin, pad_end;
};

const Layer kLayers[] = {
    {"eff dw3 32@112", 32, 112, 3, 1, 1, 1},     {"eff dw3/2 96@112", 96, 112, 3, 2, 0, 1},
    {"eff dw3 144@56", 144, 56, 3, 1, 1, 1},     {"eff dw5/2 144@56", 144, 56, 5, 2, 1, 2},
    {"eff dw5 240@28", 240, 28, 5, 1, 2, 2},     {"eff dw3/2 240@28", 240, 28, 3, 2, 0, 1},
    {"eff dw3 480@14", 480, 14, 3, 1, 1, 1},     {"eff dw5 480@14", 480, 14, 5, 1, 2, 2},
    {"eff dw5 672@14", 672, 14, 5, 1, 2, 2},     {"eff dw5/2 672@14", 672, 14, 5, 2, 1, 2},
    {"eff dw5 1152@7", 1152, 7, 5, 1, 2, 2},     {"eff dw3 1152@7", 1152, 7, 3, 1, 1, 1},
    {"cnx dw7 96@56", 96, 56, 7, 1, 3, 3},       {"cnx dw7 192@28", 192, 28, 7, 1, 3, 3},
    {"cnx dw7 384@14", 384, 14, 7, 1, 3, 3},     {"cnx dw7 768@7", 768, 7, 7, 1, 3, 3},
    {"mb2 dw3 192@28", 192, 28, 3, 1, 1, 1},     {"mb2 dw3 960@7", 960, 7, 3, 1, 1, 1},
    {"mb2 dw3/2 576@14", 576, 14, 3, 2, 0, 1},
};

}  // namespace

int main(int argc, char** argv) {
  using namespace tfpopef::kernels;
  const int batch = argc > 1 ? std::atoi(argv[1]) : 1;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const bool half = argc > 3 && argv[3][0] == 'f' && argv[3][1] == '1';
  const bool swish = argc > 4 && argv[4][0] == 's';
  const char* only = argc > 5 ? argv[5] : nullptr;
  const NchwcTileFns& tiles = kNchwcAvx512Tiles;
  double total = 0;
  for (const Layer& l : kLayers) {
    if (only != nullptr && std::strstr(l.name, only) == nullptr) continue;
    NchwcGeometry g;
    g.in_blocks = g.out_blocks = l.c / kNchwcBlock;
    g.h = g.w = l.hw;
    g.kh = g.kw = l.k;
    g.sh = g.sw = l.stride;
    g.pad_top = g.pad_left = l.pad_begin;
    g.pad_bottom = g.pad_right = l.pad_end;
    g.oh = g.ow = (l.hw + l.pad_begin + l.pad_end - l.k) / l.stride + 1;
    std::vector<float> x(batch * g.in_image_stride()), w(g.in_blocks * l.k * l.k * kNchwcBlock), b(l.c);
    std::vector<float> y(batch * g.out_image_stride());
    std::vector<uint16_t> xh(x.size(), 0x3c00), yh(y.size());  // float16 1.0
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) * 0.1f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.1f;
    NchwcEpilogue e;
    e.bias = b.data();
    e.in_register = swish ? NchwcEpilogue::InRegister::kSwish : NchwcEpilogue::InRegister::kRelu;
    e.lo = 1.0f;  // the swish's x·σ(lo·x)
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const auto start = std::chrono::steady_clock::now();
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t cb = 0; cb < g.in_blocks; ++cb)
          for (int64_t oy = 0; oy < g.oh; ++oy)
            if (half) tiles.depthwise_row_half(g, xh.data(), w.data(), e, yh.data(), n, cb, oy, 0, g.ow);
            else tiles.depthwise_row(g, x.data(), w.data(), e, y.data(), n, cb, oy, 0, g.ow);
      best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    const double gflops = 2.0 * batch * l.c * g.oh * g.ow * l.k * l.k / best / 1e3;
    std::printf("%-18s %9.1f us %6.1f GFLOP/s\n", l.name, best, gflops);
    total += best;
  }
  std::printf("total %.1f us\n", total);
}
