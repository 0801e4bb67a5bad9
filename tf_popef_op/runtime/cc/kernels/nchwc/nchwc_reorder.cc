// ToNchwc / FromNchwc: the reorders at the edges of a blocked chain (docs/popef.md, "Blocked
// layout"), float32 or float16 (moved as 16-bit words, no conversion). ToNchwc: X [N, C, H, W] (C % 8 == 0) -> Y [N, C/8, H, W, 8];
// FromNchwc: the inverse. One (image, block) at a time: 8 planes <-> one interleaved plane,
// a transpose of an 8 × H·W matrix done in strips of pixels that stay in L1.
// With attribute channels_last = 1 the plain side is [N, H, W, C] instead (a Transpose folded
// into the reorder): each pixel's 8 channels of a block are contiguous on both sides, so the
// reorder moves 8-element runs, a strip of pixels (all their channels) at a time, pixel by
// pixel: the plain side is then read or written in order, the blocked side as one sequential
// stream per block (block by block, each plain cache line was written or read in 8-element
// pieces on separate passes: 1.2-1.9x slower, ConvNeXt's [8, 56, 56, 96] most).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

constexpr int64_t kStrip = 256;  // pixels per strip: 8 KB of a float32 interleaved plane
constexpr int64_t kChannelsLastStripBytes = 32 << 10;  // a strip's plain rows: about L1

// T: float, or uint16_t for float16 (a reorder only moves elements).
template <typename T>
class NchwcReorderKernel final : public Kernel {
 public:
  NchwcReorderKernel(int64_t planes, int64_t pixels, bool to_blocked)
      : planes_(planes), pixels_(pixels), to_blocked_(to_blocked) {}

  void Run(const KernelContext& ctx) const override {
    const T* x = static_cast<const T*>(ctx.inputs[0]);
    T* y = static_cast<T*>(ctx.outputs[0]);
    const int64_t block_elements = pixels_ * kNchwcBlock;
    ParallelFor(planes_, ItemsPerChunk(block_elements, kStreamingGrain), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const T* src = x + b * block_elements;
        T* dst = y + b * block_elements;
        for (int64_t p0 = 0; p0 < pixels_; p0 += kStrip) {
          const int64_t p1 = std::min(pixels_, p0 + kStrip);
          for (int64_t lane = 0; lane < kNchwcBlock; ++lane) {
            if (to_blocked_) {
              const T* plane = src + lane * pixels_;
              for (int64_t p = p0; p < p1; ++p) dst[p * kNchwcBlock + lane] = plane[p];
            } else {
              T* plane = dst + lane * pixels_;
              for (int64_t p = p0; p < p1; ++p) plane[p] = src[p * kNchwcBlock + lane];
            }
          }
        }
      }
    });
  }

 private:
  const int64_t planes_, pixels_;  // planes_: N · C/8 blocks of 8 channels
  const bool to_blocked_;
};

// The plain side channels last: [N, H·W, C] <-> [N, C/8, H·W, 8].
template <typename T>
class NchwcChannelsLastReorderKernel final : public Kernel {
 public:
  NchwcChannelsLastReorderKernel(int64_t n, int64_t blocks, int64_t pixels, bool to_blocked)
      : n_(n), blocks_(blocks), pixels_(pixels), to_blocked_(to_blocked),
        strip_(std::max<int64_t>(1, kChannelsLastStripBytes /
                                        static_cast<int64_t>(blocks * kNchwcBlock * sizeof(T)))),
        strips_((pixels + strip_ - 1) / strip_) {}

  void Run(const KernelContext& ctx) const override {
    const T* x = static_cast<const T*>(ctx.inputs[0]);
    T* y = static_cast<T*>(ctx.outputs[0]);
    const int64_t channels = blocks_ * kNchwcBlock;
    const size_t run_bytes = kNchwcBlock * sizeof(T);
    ParallelFor(n_ * strips_, ItemsPerChunk(strip_ * channels, kStreamingGrain), [&](int64_t i0, int64_t i1) {
      for (int64_t item = i0; item < i1; ++item) {
        const int64_t image = item / strips_, p0 = (item % strips_) * strip_;
        const int64_t p1 = std::min(pixels_, p0 + strip_);
        const int64_t block_stride = pixels_ * kNchwcBlock;
        const int64_t blocked0 = image * blocks_ * block_stride;
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t plain = (image * pixels_ + p) * channels;
          const int64_t blocked = blocked0 + p * kNchwcBlock;
          for (int64_t b = 0; b < blocks_; ++b) {
            if (to_blocked_)
              std::memcpy(y + blocked + b * block_stride, x + plain + b * kNchwcBlock, run_bytes);
            else
              std::memcpy(y + plain + b * kNchwcBlock, x + blocked + b * block_stride, run_bytes);
          }
        }
      }
    });
  }

 private:
  const int64_t n_, blocks_, pixels_;
  const bool to_blocked_;
  const int64_t strip_, strips_;
};

std::unique_ptr<Kernel> CreateReorder(const KernelSpec& spec, bool to_blocked) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  const bool channels_last = spec.attrs.Has("channels_last") && CheckedFlag(spec, "channels_last");
  const auto& plain = to_blocked ? spec.inputs[0].shape : spec.outputs[0].shape;
  const auto& blocked = to_blocked ? spec.outputs[0].shape : spec.inputs[0].shape;
  CheckBlocked(spec, to_blocked ? "output Y" : "input X", blocked);
  const int64_t channels = blocked[1] * kNchwcBlock;
  CheckShape(spec, to_blocked ? "input X" : "output Y", plain,
             channels_last ? std::vector<int64_t>{blocked[0], blocked[2], blocked[3], channels}
                           : std::vector<int64_t>{blocked[0], channels, blocked[2], blocked[3]});
  const int64_t pixels = blocked[2] * blocked[3];
  const bool half = spec.inputs[0].dtype == DType::kFloat16;
  if (channels_last) {
    if (half)
      return std::make_unique<NchwcChannelsLastReorderKernel<uint16_t>>(blocked[0], blocked[1], pixels, to_blocked);
    return std::make_unique<NchwcChannelsLastReorderKernel<float>>(blocked[0], blocked[1], pixels, to_blocked);
  }
  const int64_t planes = blocked[0] * blocked[1];
  if (half) return std::make_unique<NchwcReorderKernel<uint16_t>>(planes, pixels, to_blocked);
  return std::make_unique<NchwcReorderKernel<float>>(planes, pixels, to_blocked);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("ToNchwc", [](const KernelSpec& spec) { return CreateReorder(spec, true); });
TFPOPEF_REGISTER_KERNEL("FromNchwc", [](const KernelSpec& spec) { return CreateReorder(spec, false); });

}  // namespace kernels
}  // namespace tfpopef
