// Times the NCHW8c convolution row function (kernels/nchwc/nchwc_tiles.inc) over the 1x1 layers
// of ResNet50, MobileNetV2, EfficientNetB0 and InceptionV3 (batch 1, TF_POPEF_NUM_THREADS threads on the runtime's pool, one item per chunk, AVX-512 build),
// walking the work items as NchwcConv does (nchwc_conv.cc: pointwise planes as one long row cut
// into segments, items of 8 output blocks, passes of 128 KB of weights); bias + Relu in
// registers; paired weights when M/8 is even; best of `reps` passes per layer, GFLOP/s.
// Build against a checkout's sources, or against another build's to compare, then run the two
// binaries alternately:
//
//   INC=$(.venv/bin/python -c "import nlohmann_json; print(nlohmann_json.get_include())")
//   K=tf_popef_op/runtime/cc/kernels
//   g++ -std=c++17 -O3 -I. -I$INC -pthread benchmarks/cc/nchwc_pointwise_timing.cc \
//       $K/nchwc/nchwc_tiles_avx512.cc $K/support/vector_math.cc $K/support/vector_math_avx2.cc \
//       $K/support/vector_math_avx512.cc \
//       $K/support/fp16_convert.cc $K/support/thread_pool.cc -o pw_new
//   ./pw_new [batch=1] [reps=5] [f32|f16] [pass KB=128] [segment pixels=192] [item blocks=8] [layer|all]
//       [balance=1] [subsample=1] [schedule T] [stream=0] [sum=0] [inplace=0]
//   PW_LAYERS="64,56,256;64,14,256" ./pw_new ...   (other stride-1 shapes: C,HW,M each)
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
  int c, hw, m, stride;
};

const Layer kLayers[] = {
    {"r50 64->256 @56", 64, 56, 256, 1},       {"r50 256->64 @56", 256, 56, 64, 1},
    {"r50 128->512 @28", 128, 28, 512, 1},     {"r50 512->128 @28", 512, 28, 128, 1},
    {"r50 256->1024 @14", 256, 14, 1024, 1},   {"r50 1024->256 @14", 1024, 14, 256, 1},
    {"r50 512->2048 @7", 512, 7, 2048, 1},     {"r50 2048->512 @7", 2048, 7, 512, 1},
    {"r50 256->512 @56/2", 256, 56, 512, 2},   {"r50 512->1024 @28/2", 512, 28, 1024, 2},
    {"r50 1024->2048 @14/2", 1024, 14, 2048, 2}, {"r50 1024->512 @14/2", 1024, 14, 512, 2},
    {"mb2 16->96 @112", 16, 112, 96, 1},       {"mb2 24->144 @56", 24, 56, 144, 1},
    {"mb2 144->24 @56", 144, 56, 24, 1},       {"mb2 32->192 @28", 32, 28, 192, 1},
    {"mb2 192->32 @28", 192, 28, 32, 1},       {"mb2 64->384 @14", 64, 14, 384, 1},
    {"mb2 384->64 @14", 384, 14, 64, 1},       {"mb2 96->576 @14", 96, 14, 576, 1},
    {"mb2 576->96 @14", 576, 14, 96, 1},       {"mb2 160->960 @7", 160, 7, 960, 1},
    {"mb2 960->160 @7", 960, 7, 160, 1},       {"mb2 320->1280 @7", 320, 7, 1280, 1},
    {"eff 40->240 @28", 40, 28, 240, 1},       {"eff 240->40 @28", 240, 28, 40, 1},
    {"eff 80->480 @14", 80, 14, 480, 1},       {"eff 480->80 @14", 480, 14, 80, 1},
    {"eff 112->672 @14", 112, 14, 672, 1},     {"eff 672->112 @14", 672, 14, 112, 1},
    {"eff 192->1152 @7", 192, 7, 1152, 1},     {"eff 1152->192 @7", 1152, 7, 192, 1},
    {"inc 768->192 @17", 768, 17, 192, 1},     {"inc 288->64 @35", 288, 35, 64, 1},
    {"inc 2048->448 @8", 2048, 8, 448, 1},     {"inc 64->80 @73", 64, 73, 80, 1},
};

// nchwc_conv.cc's work split, overridable from the command line to sweep it.
int64_t kSegmentPixels = 192, kItemBlocks = 8, kPassWeightBytes = 128 * 1024;
constexpr int64_t kWidenMinPixels = 96, kSubsampleCopyMaxWidth = 16;

}  // namespace

int main(int argc, char** argv) {
  using namespace tfpopef::kernels;
  const int batch = argc > 1 ? std::atoi(argv[1]) : 1;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const bool half = argc > 3 && std::strcmp(argv[3], "f16") == 0;
  if (argc > 4) kPassWeightBytes = std::atoi(argv[4]) * 1024;
  if (argc > 5) kSegmentPixels = std::atoi(argv[5]);
  if (argc > 6) kItemBlocks = std::atoi(argv[6]);
  const char* only = argc > 7 && std::strcmp(argv[7], "all") != 0 ? argv[7] : nullptr;
  const bool balance = argc <= 8 || std::atoi(argv[8]) != 0;  // nchwc_conv.cc's cut of few-item layers
  const bool subsample = argc <= 9 || std::atoi(argv[9]) != 0;  // strided 1x1 on a copy of its pixels
  // "schedule T": time every work item on this thread, then print the layer's time on T threads
  // of the pool as list scheduling of its chunks predicts it (up to 4 near-equal chunks per
  // thread, each taken by the first free thread), for a machine too busy to time T threads.
  const int schedule_threads = argc > 11 && std::strcmp(argv[10], "schedule") == 0 ? std::atoi(argv[11]) : 0;
  // "stream" (argument 12): Y written with streaming stores (NchwcGeometry::stream_output);
  // "sum" (argument 13): a residual Sum of Y's shape in the epilogue, as ResNet's last 1x1 of a block.
  const bool stream = argc > 12 && std::atoi(argv[12]) != 0;
  const bool with_sum = argc > 13 && std::atoi(argv[13]) != 0;
  // "inplace" (argument 14, with sum): the Sum is Y's own bytes (the memory plan's in-place
  // Sum; NchwcConv then sets sum_first with several passes and does not stream).
  const bool in_place = with_sum && argc > 14 && std::atoi(argv[14]) != 0;
  const NchwcTileFns& tiles = kNchwcAvx512Tiles;
  double total_s = 0, total_flops = 0;
  // PW_LAYERS="C,HW,M;C,HW,M": time these stride-1 shapes instead of the list above (up to 16).
  std::vector<Layer> layers(std::begin(kLayers), std::end(kLayers));
  static char names[16][32];
  if (const char* spec = std::getenv("PW_LAYERS")) {
    layers.clear();
    int c, hw, m;
    for (const char* s = spec; s != nullptr && layers.size() < 16 && std::sscanf(s, "%d,%d,%d", &c, &hw, &m) == 3;) {
      std::snprintf(names[layers.size()], sizeof(names[0]), "%d->%d @%d", c, m, hw);
      layers.push_back({names[layers.size()], c, hw, m, 1});
      s = std::strchr(s, ';');
      if (s != nullptr) ++s;
    }
  }
  for (const Layer& l : layers) {
    if (only != nullptr && std::strstr(l.name, only) == nullptr) continue;
    NchwcGeometry g;
    g.in_blocks = (l.c + 7) / 8;
    g.out_blocks = (l.m + 7) / 8;
    g.out_group = g.out_blocks % 2 == 0 ? 2 : 1;
    g.h = g.w = l.hw;
    g.sh = g.sw = l.stride;
    g.oh = g.ow = (l.hw - 1) / l.stride + 1;
    NchwcGeometry strided = g;  // the input's, when a strided 1x1 runs on a copy of its pixels
    const bool copy = subsample && l.stride > 1 && g.ow <= kSubsampleCopyMaxWidth;
    if (copy) {
      g.h = g.oh;
      g.w = g.ow;
      g.sh = g.sw = 1;
    }
    if (g.sh == 1) {
      g.w = g.ow = g.oh * g.ow;
      g.h = g.oh = 1;
    }
    int64_t segments = g.ow > 2 * kSegmentPixels ? (g.ow + kSegmentPixels - 1) / kSegmentPixels : 1;
    const int64_t groups = (g.out_blocks + kItemBlocks - 1) / kItemBlocks;
    const int64_t threads = ThreadPool::Global().num_threads();
    auto count = [&] { return batch * g.oh * segments * groups; };
    while (balance && threads > 1 && count() < 4 * threads && g.ow / (segments + 1) >= 24 &&
           (count() % threads != 0 || g.out_blocks % kItemBlocks != 0))
      ++segments;
    const int64_t segment = (g.ow + segments - 1) / segments;
    g.widen_weights = half && segment >= kWidenMinPixels;
    g.stream_output = stream;
    const int64_t wbytes = half && !g.widen_weights ? 2 : 4;
    g.in_blocks_per_pass = std::max<int64_t>(1, kPassWeightBytes / (kItemBlocks * 8 * 8 * wbytes));
    const bool weights_outer = g.in_blocks * g.out_blocks * 64 > g.in_image_stride();
    const int64_t xn = batch * (copy ? strided : g).in_image_stride(), yn = batch * g.out_image_stride();
    const int64_t wn = g.in_blocks * g.out_blocks * 64;
    std::vector<float> x(xn), w(wn), bias(g.out_blocks * 8), y_buffer(yn + 16), partial(yn);
    // Y 64-byte aligned, as an arena tensor (the streaming stores need whole aligned vectors).
    float* y = y_buffer.data() + (64 - reinterpret_cast<uintptr_t>(y_buffer.data()) % 64) % 64 / sizeof(float);
    for (int64_t i = 0; i < xn; ++i) x[i] = static_cast<float>((i * 7919) % 97) / 97.0f - 0.5f;
    for (int64_t i = 0; i < wn; ++i) w[i] = static_cast<float>((i * 104729) % 89) / 890.0f - 0.05f;
    std::vector<uint16_t> xh(xn), wh(wn), yh_buffer(yn + 32), sumh(with_sum ? yn : 0);
    uint16_t* yh = yh_buffer.data() + (64 - reinterpret_cast<uintptr_t>(yh_buffer.data()) % 64) % 64 / sizeof(uint16_t);
    std::vector<float> sum(with_sum ? yn : 0, 0.25f);
    for (int64_t i = 0; i < xn; ++i) xh[i] = tfpopef::FloatToHalf(x[i]);
    for (int64_t i = 0; i < wn; ++i) wh[i] = tfpopef::FloatToHalf(w[i]);
    NchwcEpilogue e;
    e.bias = bias.data();
    e.in_register = NchwcEpilogue::InRegister::kRelu;
    NchwcEpilogue eh = e;
    if (with_sum) {
      e.sum = in_place ? static_cast<const void*>(y) : sum.data();
      eh.sum = in_place ? static_cast<const void*>(yh) : sumh.data();
      if (in_place) {
        std::fill(y, y + yn, 0.25f);
        std::fill(yh, yh + yn, tfpopef::FloatToHalf(0.25f));
        e.sum_first = g.in_blocks > g.in_blocks_per_pass;
      }
    }
    const int64_t rows = batch * g.oh * segments, items = rows * groups;
    // Work item i as NchwcConv orders them: (row segment, block group), block group outer when
    // the weights are bigger than an image's input.
    auto run_item = [&](int64_t i) {
      const int64_t row = weights_outer ? i % rows : i / groups, grp = weights_outer ? i / rows : i % groups;
      const int64_t seg = row % segments, oy = (row / segments) % g.oh, n = row / (segments * g.oh);
      const int64_t ox0 = seg * segment, ox1 = std::min(g.ow, ox0 + segment);
      const int64_t ob0 = grp * kItemBlocks, obn = std::min(kItemBlocks, g.out_blocks - ob0);
      if (half)
        tiles.conv_row_half(g, xh.data(), wh.data(), eh, partial.data(), yh, n, ob0, obn, oy, ox0, ox1);
      else
        tiles.conv_row(g, x.data(), w.data(), e, y, y, n, ob0, obn, oy, ox0, ox1);
    };
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      if (copy) {  // (the copy's pixels overwrite the front of X: their values do not matter here)
        auto subsample = [&](auto* data) {
          const int64_t planes = batch * strided.in_blocks, ow = strided.ow, oh = strided.oh;
          ParallelFor(planes, 1, [&](int64_t b0, int64_t b1) {
            for (int64_t b = b0; b < b1; ++b) {
              const auto* src = data + b * strided.in_block_stride();
              auto* dst = data + b * oh * ow * 8;
              for (int64_t oy = 0; oy < oh; ++oy)
                for (int64_t ox = 0; ox < ow; ++ox)
                  std::memmove(dst + (oy * ow + ox) * 8, src + (oy * strided.sh * strided.w + ox * strided.sw) * 8,
                               8 * sizeof(*data));
            }
          });
        };
        if (half) subsample(xh.data());
        else subsample(x.data());
      }
      ParallelFor(items, 1, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) run_item(i);
        if (stream) StreamFence();
      });
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (schedule_threads > 0) {  // per-item times, best of reps, then the chunks' list schedule
      std::vector<double> item_s(items, 1e30);
      for (int r = 0; r < reps; ++r)
        for (int64_t i = 0; i < items; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          run_item(i);
          item_s[i] = std::min(item_s[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
      const int64_t chunks = std::min<int64_t>(items, 4 * schedule_threads);
      std::vector<double> free_at(schedule_threads, 0.0);
      for (int64_t c = 0; c < chunks; ++c) {
        double work = 0;
        for (int64_t i = items * c / chunks; i < items * (c + 1) / chunks; ++i) work += item_s[i];
        *std::min_element(free_at.begin(), free_at.end()) += work;
      }
      best = *std::max_element(free_at.begin(), free_at.end());
    }
    const double flops = 2.0 * batch * l.m * g.oh * g.ow * l.c;
    total_s += best;
    total_flops += flops;
    std::printf("%-22s %8.1f us %7.1f GFLOP/s\n", l.name, best * 1e6, flops / best * 1e-9);
  }
  std::printf("%-22s %8.1f us %7.1f GFLOP/s\n", "total", total_s * 1e6, total_flops / total_s * 1e-9);
  return 0;
}
