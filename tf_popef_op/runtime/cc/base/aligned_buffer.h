// A heap buffer with 64-byte aligned storage (device weight/arena memory, staging buffers,
// runner-allocated outputs), so kernels may use aligned SIMD loads on any of them.
//
// Ownership: owns its bytes; movable, not copyable. Not thread-safe (callers synchronize).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#include "tf_popef_op/runtime/cc/base/error.h"

namespace tfpopef {

constexpr size_t kDeviceAlignment = 64;

inline uint64_t AlignUp(uint64_t n, uint64_t alignment = kDeviceAlignment) {
  return (n + alignment - 1) / alignment * alignment;
}

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size, bool zeroed = false) { Resize(size, zeroed); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& other) noexcept { *this = std::move(other); }
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    if (this != &other) {
      Free();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~AlignedBuffer() { Free(); }

  // Discards the contents. A failed allocation is kResourceExhausted (host memory), not a crash.
  void Resize(size_t size, bool zeroed = false) {
    Free();
    if (size == 0) return;
    data_ = static_cast<uint8_t*>(::operator new(AlignUp(size), std::align_val_t(kDeviceAlignment), std::nothrow));
    if (data_ == nullptr)
      throw Error(ErrorCode::kResourceExhausted, "cannot allocate " + std::to_string(size) + " bytes of host memory");
    size_ = size;
    if (zeroed) std::memset(data_, 0, size_);
  }

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void Free() {
    if (data_ != nullptr) ::operator delete(data_, std::align_val_t(kDeviceAlignment));
    data_ = nullptr;
    size_ = 0;
  }
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tfpopef
