// Times the NCHW8c convolution row functions (kernels/nchwc/nchwc_tiles.inc) in float32 and in
// float16 (X, W, Y float16: conv_row_half) on the same layer, alternating the two in one
// process, so the machine's load falls on both alike: the float16 tiles' cost against float32,
// layer by layer. Layers: direct (not Winograd) 1x1 and KxK convolutions of ResNet50,
// DenseNet121, InceptionV3 and MobileNetV2 at batch 1. Work items as NchwcConv makes them
// (nchwc_conv.cc): pointwise planes as one long row cut into segments, few-item layers cut
// further for the pool's threads, items of 8 output blocks, passes of 128 KB of weights,
// float16 weights widened per item on rows of >= 96 pixels, rows of <= 32 pixels with padded
// columns on a zero-padded copy (the copy is made once, outside the timing); bias + Relu in
// registers; paired weights when M/8 is even. Threads: the runtime's pool
// (TF_POPEF_NUM_THREADS). A third variant, "fp16w", is float16 X and Y with W widened to
// float32 beforehand (conv_row_half_wide_weights: a copy made once, on the first run, so no per-item or
// in-register conversion of W; passes sized as float32's). Prints best-of-reps µs per variant
// and each float16 variant's time over float32's.
//
//   INC=$(.venv/bin/python -c "import nlohmann_json; print(nlohmann_json.get_include())")
//   K=tf_popef_op/runtime/cc/kernels
//   g++ -std=c++17 -O3 -I. -I$INC -pthread benchmarks/cc/nchwc_precision_timing.cc \
//       $K/nchwc/nchwc_tiles_avx512.cc $K/nchwc/nchwc_tiles_avx2.cc $K/support/vector_math.cc $K/support/vector_math_avx2.cc \
//       $K/support/vector_math_avx512.cc $K/support/fp16_convert.cc $K/support/thread_pool.cc -o prec
//   TF_POPEF_NUM_THREADS=1 ./prec [reps=20] [layer substring|all] [avx512|avx2] [extra columns=0]
//       [float16 blocks per pass=0] [float16 weights widened per item: -1 NchwcConv's rule, 0 no, 1 yes]
// extra columns: the padded copy's rows that much wider (its planes' stride; the tiles do not
// read them); float16 blocks per pass: input blocks per pass over the input channels for
// float16 (0: NchwcConv's rule, 128 KB of weights as they are read).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace {

struct Layer {
  const char* name;
  int c, h, w, m, kh, kw, stride, pad_h, pad_w;
};

const Layer kLayers[] = {
    {"r50 1x1 64->256 @56", 64, 56, 56, 256, 1, 1, 1, 0, 0},
    {"r50 1x1 512->128 @28", 512, 28, 28, 128, 1, 1, 1, 0, 0},
    {"r50 1x1 256->1024 @14", 256, 14, 14, 1024, 1, 1, 1, 0, 0},
    {"r50 1x1 1024->256 @14", 1024, 14, 14, 256, 1, 1, 1, 0, 0},
    {"r50 1x1 2048->512 @7", 2048, 7, 7, 512, 1, 1, 1, 0, 0},
    {"dn 1x1 256->128 @56", 256, 56, 56, 128, 1, 1, 1, 0, 0},
    {"dn 1x1 512->128 @28", 512, 28, 28, 128, 1, 1, 1, 0, 0},
    {"dn 1x1 1024->512 @14", 1024, 14, 14, 512, 1, 1, 1, 0, 0},
    {"dn 1x1 992->128 @14", 992, 14, 14, 128, 1, 1, 1, 0, 0},
    {"dn 1x1 992->128 @7", 992, 7, 7, 128, 1, 1, 1, 0, 0},
    {"dn 3x3 128->32 @14", 128, 14, 14, 32, 3, 3, 1, 1, 1},
    {"dn 3x3 128->32 @7", 128, 7, 7, 32, 3, 3, 1, 1, 1},
    {"inc 1x1 768->192 @17", 768, 17, 17, 192, 1, 1, 1, 0, 0},
    {"inc 5x5 48->64 @35", 48, 35, 35, 64, 5, 5, 1, 2, 2},
    {"inc 1x7 128->128 @17", 128, 17, 17, 128, 1, 7, 1, 0, 3},
    {"inc 7x1 128->192 @17", 128, 17, 17, 192, 7, 1, 1, 3, 0},
    {"inc 3x3/2 288->384 @35", 288, 35, 35, 384, 3, 3, 2, 0, 0},
    {"inc 3x3 448->384 @8", 448, 8, 8, 384, 3, 3, 1, 1, 1},
    {"mb2 1x1 32->192 @28", 32, 28, 28, 192, 1, 1, 1, 0, 0},
    {"mb2 1x1 576->96 @14", 576, 14, 14, 96, 1, 1, 1, 0, 0},
};

// nchwc_conv.cc's work split.
constexpr int64_t kSegmentPixels = 192, kItemBlocks = 8, kPassWeightBytes = 128 * 1024, kWidenMinPixels = 96,
                  kPadCopyMaxWidth = 32;

}  // namespace

int main(int argc, char** argv) {
  using namespace tfpopef::kernels;
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  const char* only = argc > 2 && std::strcmp(argv[2], "all") != 0 ? argv[2] : nullptr;
  const NchwcTileFns& tiles = argc > 3 && std::strcmp(argv[3], "avx2") == 0 ? kNchwcAvx2Tiles : kNchwcAvx512Tiles;
  const int extra_columns = argc > 4 ? std::atoi(argv[4]) : 0;
  const int half_pass_blocks = argc > 5 ? std::atoi(argv[5]) : 0;
  const int widen_half = argc > 6 ? std::atoi(argv[6]) : -1;
  const int64_t threads = ThreadPool::Global().num_threads();
  double total32 = 0, total16 = 0, total16w = 0;
  for (const Layer& l : kLayers) {
    if (only != nullptr && std::strstr(l.name, only) == nullptr) continue;
    NchwcGeometry g;
    g.in_blocks = (l.c + 7) / 8;
    g.out_blocks = (l.m + 7) / 8;
    g.out_group = g.out_blocks % 2 == 0 ? 2 : 1;
    g.h = l.h;
    g.w = l.w;
    g.kh = l.kh;
    g.kw = l.kw;
    g.sh = g.sw = l.stride;
    g.pad_top = g.pad_bottom = l.pad_h;
    g.pad_left = g.pad_right = l.pad_w;
    g.oh = (l.h + 2 * l.pad_h - l.kh) / l.stride + 1;
    g.ow = (l.w + 2 * l.pad_w - l.kw) / l.stride + 1;
    if (g.ow <= kPadCopyMaxWidth && l.pad_w > 0) {  // NchwcConv's padded copy of X
      g.h += 2 * l.pad_h;
      g.w += 2 * l.pad_w + extra_columns;
      g.pad_top = g.pad_left = g.pad_bottom = g.pad_right = 0;
    }
    if (g.kh == 1 && g.kw == 1 && g.sh == 1 && g.oh == g.h && g.ow == g.w) {
      g.w = g.ow = g.oh * g.ow;
      g.h = g.oh = 1;
    }
    int64_t segments = g.ow > 2 * kSegmentPixels ? (g.ow + kSegmentPixels - 1) / kSegmentPixels : 1;
    const int64_t groups = (g.out_blocks + kItemBlocks - 1) / kItemBlocks;
    auto count = [&] { return g.oh * segments * groups; };
    while (threads > 1 && count() < 4 * threads && g.ow / (segments + 1) >= 24 &&
           (count() % threads != 0 || g.out_blocks % kItemBlocks != 0))
      ++segments;
    const int64_t segment = (g.ow + segments - 1) / segments;
    NchwcGeometry g32 = g, g16 = g;
    g16.widen_weights = widen_half < 0 ? segment >= kWidenMinPixels : widen_half == 1;
    const int64_t taps = g.kh * g.kw * 8 * 8 * kItemBlocks;
    g32.in_blocks_per_pass = std::max<int64_t>(1, kPassWeightBytes / (taps * 4));
    g16.in_blocks_per_pass = std::max<int64_t>(1, kPassWeightBytes / (taps * (g16.widen_weights ? 4 : 2)));
    if (half_pass_blocks > 0) g16.in_blocks_per_pass = half_pass_blocks;
    const int64_t wn = static_cast<int64_t>(g.in_blocks) * g.out_blocks * 64 * g.kh * g.kw;
    const bool weights_outer = wn > g.in_image_stride();
    const int64_t xn = g.in_image_stride(), yn = g.out_image_stride();
    std::vector<float> x(xn), w(wn), bias(g.out_blocks * 8), y(yn);
    for (int64_t i = 0; i < xn; ++i) x[i] = static_cast<float>((i * 7919) % 97) / 97.0f - 0.5f;
    for (int64_t i = 0; i < wn; ++i) w[i] = static_cast<float>((i * 104729) % 89) / 890.0f - 0.05f;
    std::vector<uint16_t> xh(xn), wh(wn), yh(yn);
    std::vector<float> partial(yn), w_wide(wn);
    for (int64_t i = 0; i < wn; ++i) w_wide[i] = tfpopef::HalfToFloat(wh[i]);
    NchwcGeometry gw = g32;  // float32 weights, float16 activations
    for (int64_t i = 0; i < xn; ++i) xh[i] = tfpopef::FloatToHalf(x[i]);
    for (int64_t i = 0; i < wn; ++i) wh[i] = tfpopef::FloatToHalf(w[i]);
    NchwcEpilogue e;
    e.bias = bias.data();
    e.in_register = NchwcEpilogue::InRegister::kRelu;
    const int64_t rows = g.oh * segments, items = rows * groups;
    enum Variant { kFloat32, kFloat16, kFloat16WideWeights };
    auto time = [&](Variant v) {
      const NchwcGeometry& gg = v == kFloat16 ? g16 : v == kFloat16WideWeights ? gw : g32;
      const auto t0 = std::chrono::steady_clock::now();
      ParallelFor(items, 1, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t row = weights_outer ? i % rows : i / groups, grp = weights_outer ? i / rows : i % groups;
          const int64_t seg = row % segments, oy = row / segments;
          const int64_t ox0 = seg * segment, ox1 = std::min(gg.ow, ox0 + segment);
          const int64_t ob0 = grp * kItemBlocks, obn = std::min(kItemBlocks, gg.out_blocks - ob0);
          if (v == kFloat16)
            tiles.conv_row_half(gg, xh.data(), wh.data(), e, partial.data(), yh.data(), 0, ob0, obn, oy, ox0, ox1);
          else if (v == kFloat16WideWeights)
            tiles.conv_row_half_wide_weights(gg, xh.data(), w_wide.data(), e, partial.data(), yh.data(), 0, ob0, obn,
                                             oy, ox0, ox1);
          else tiles.conv_row(gg, x.data(), w.data(), e, y.data(), y.data(), 0, ob0, obn, oy, ox0, ox1);
        }
      });
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    double best32 = 1e30, best16 = 1e30, best16w = 1e30;
    time(kFloat32);
    time(kFloat16);
    time(kFloat16WideWeights);
    for (int r = 0; r < reps; ++r) {
      best32 = std::min(best32, time(kFloat32));
      best16 = std::min(best16, time(kFloat16));
      best16w = std::min(best16w, time(kFloat16WideWeights));
    }
    total32 += best32;
    total16 += best16;
    total16w += best16w;
    std::printf("%-24s fp32 %8.1f  fp16 %8.1f  fp16w %8.1f us  fp16/fp32 %5.3f  fp16w/fp32 %5.3f  (items %lld, "
                "segment %lld, widen %d)\n",
                l.name, best32 * 1e6, best16 * 1e6, best16w * 1e6, best16 / best32, best16w / best32,
                static_cast<long long>(items), static_cast<long long>(segment), g16.widen_weights ? 1 : 0);
  }
  std::printf("%-24s fp32 %8.1f  fp16 %8.1f  fp16w %8.1f us  fp16/fp32 %5.3f  fp16w/fp32 %5.3f\n", "total",
              total32 * 1e6, total16 * 1e6, total16w * 1e6, total16 / total32, total16w / total32);
  return 0;
}
