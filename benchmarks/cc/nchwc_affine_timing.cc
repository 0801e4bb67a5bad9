// Times DenseNet121's per-channel affines (the 1x1 depthwise NchwcConvs of its pre-activation
// BatchNorms, bias + Relu, batch 1, float32) on one thread: the AVX-512 depthwise window tiles
// over 192-pixel row segments (how NchwcConv ran them before) against the streaming plane loop
// NchwcConv now runs them with (nchwc_channel_affine.h); best of `reps` passes per layer.
// Links the built runtime library:
//
//   INC=$(.venv/bin/python -c "import nlohmann_json; print(nlohmann_json.get_include())")
//   g++ -std=c++17 -O2 -I. -I$INC benchmarks/cc/nchwc_affine_timing.cc -Ltf_popef_op/lib \
//       -Wl,-rpath,$PWD/tf_popef_op/lib -ltfpopef_runtime -pthread -o affine_timing
//   ./affine_timing [reps=30]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_channel_affine.h"

int main(int argc, char** argv) {
  using namespace tfpopef::kernels;
  const int reps = argc > 1 ? std::atoi(argv[1]) : 30;
  struct Layer {
    int c, hw;
  } layers[] = {{64, 3136}, {224, 3136}, {224, 784}, {480, 784}, {256, 196}, {992, 196}, {512, 49}, {992, 49}};
  const NchwcTileFns& tiles = kNchwcAvx512Tiles;
  const ChannelAffinePlanesFn<float> planes = ChannelAffinePlanes();
  if (planes == nullptr) {
    std::printf("this host has no AVX2 path\n");
    return 1;
  }
  for (const Layer& l : layers) {
    NchwcGeometry g;
    g.in_blocks = g.out_blocks = l.c / kNchwcBlock;
    g.h = g.oh = 1;
    g.w = g.ow = l.hw;
    g.kh = g.kw = g.sh = g.sw = 1;
    std::vector<float> x(l.c * l.hw), w(l.c), b(l.c), y(x.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) * 0.1f - 0.5f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.1f, b[i] = 0.01f * (i % 5);
    NchwcEpilogue e;
    e.bias = b.data();
    e.in_register = NchwcEpilogue::InRegister::kRelu;
    const int64_t segs = l.hw > 384 ? (l.hw + 191) / 192 : 1, seg = (l.hw + segs - 1) / segs;
    double best_tiles = 1e30, best_planes = 1e30;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t cb = 0; cb < g.in_blocks; ++cb)
        for (int64_t s = 0; s < segs; ++s)
          tiles.depthwise_row(g, x.data(), w.data(), e, y.data(), 0, cb, 0, s * seg,
                              std::min<int64_t>(l.hw, (s + 1) * seg));
      const auto t1 = std::chrono::steady_clock::now();
      planes(x.data(), w.data(), e, y.data(), g.in_blocks, l.hw, 0, g.in_blocks);
      const auto t2 = std::chrono::steady_clock::now();
      best_tiles = std::min(best_tiles, std::chrono::duration<double, std::micro>(t1 - t0).count());
      best_planes = std::min(best_planes, std::chrono::duration<double, std::micro>(t2 - t1).count());
    }
    const double mb = 2.0 * l.c * l.hw * sizeof(float) / 1e6;
    std::printf("C %4d @ %4d px: %.2f MB  tiles %7.1f us (%5.1f GB/s)  planes %7.1f us (%5.1f GB/s)\n", l.c, l.hw, mb,
                best_tiles, mb / best_tiles * 1e3, best_planes, mb / best_planes * 1e3);
  }
}
