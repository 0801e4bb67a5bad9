// A heap buffer with 64-byte aligned storage (device weight/arena memory, staging buffers,
// runner-allocated outputs), so kernels may use aligned SIMD loads on any of them.
//
// Long-lived buffers asked for with Pages::kHugeIfLarge (device weights and arena, staging,
// scratch) of kHugePageBytes or more are their own anonymous mapping, 2 MiB aligned and advised
// MADV_HUGEPAGE: with transparent huge pages in `madvise` mode nothing else backs them with
// 2 MiB pages, and multi-MB arenas streamed by pools and copies otherwise walk 4 KiB pages.
// The mapping ends at the buffer's last 4 KiB page (no 2 MiB rounding: the partial tail stays
// on small pages). When the mapping or the advice is unavailable, or TF_POPEF_HUGE_PAGES=0,
// the buffer comes from aligned operator new as smaller ones do; a load never fails for it.
// Per-request outputs stay on operator new: a mapping per request would fault every run.
//
// Ownership: owns its bytes; movable, not copyable. Not thread-safe (callers synchronize).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "tf_popef_op/runtime/cc/base/error.h"

namespace tfpopef {

constexpr size_t kDeviceAlignment = 64;
constexpr size_t kHugePageBytes = size_t{2} << 20;

inline uint64_t AlignUp(uint64_t n, uint64_t alignment = kDeviceAlignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// TF_POPEF_HUGE_PAGES=0 keeps every buffer on operator new (read at each large allocation, so
// a process may compare both placements).
inline bool HugePagesAllowed() {
  const char* v = std::getenv("TF_POPEF_HUGE_PAGES");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

class AlignedBuffer {
 public:
  enum class Pages { kSmall, kHugeIfLarge };

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size, bool zeroed = false, Pages pages = Pages::kSmall) { Resize(size, zeroed, pages); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& other) noexcept { *this = std::move(other); }
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    if (this != &other) {
      Free();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    }
    return *this;
  }
  ~AlignedBuffer() { Free(); }

  // Discards the contents. A failed allocation is kResourceExhausted (host memory), not a crash.
  void Resize(size_t size, bool zeroed = false, Pages pages = Pages::kSmall) {
    Free();
    if (size == 0) return;
    if (pages == Pages::kHugeIfLarge && size >= kHugePageBytes && HugePagesAllowed() && MapHuge(size)) {
      size_ = size;  // a fresh anonymous mapping is already zero
      return;
    }
    data_ = static_cast<uint8_t*>(::operator new(AlignUp(size), std::align_val_t(kDeviceAlignment), std::nothrow));
    if (data_ == nullptr)
      throw Error(ErrorCode::kResourceExhausted, "cannot allocate " + std::to_string(size) + " bytes of host memory");
    size_ = size;
    if (zeroed) std::memset(data_, 0, size_);
  }

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // The buffer is its own 2 MiB-aligned mapping advised MADV_HUGEPAGE (whether the kernel
  // backs it with huge pages is its choice: see AnonHugePages in /proc/self/smaps).
  bool huge_pages() const { return mapped_bytes_ != 0; }

 private:
  // Maps `size` bytes at a 2 MiB boundary: reserves one huge page more, then unmaps the
  // unaligned head and everything past the last 4 KiB page of the buffer.
  bool MapHuge(size_t size) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t bytes = AlignUp(size, page);
    const size_t reserved = bytes + kHugePageBytes;
    void* m = ::mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return false;
    auto* base = static_cast<uint8_t*>(m);
    auto* aligned = reinterpret_cast<uint8_t*>(AlignUp(reinterpret_cast<uintptr_t>(base), kHugePageBytes));
    if (aligned > base) ::munmap(base, aligned - base);
    const size_t tail = base + reserved - (aligned + bytes);
    if (tail > 0) ::munmap(aligned + bytes, tail);
    if (::madvise(aligned, bytes, MADV_HUGEPAGE) != 0) {  // no THP in this kernel
      ::munmap(aligned, bytes);
      return false;
    }
    data_ = aligned;
    mapped_bytes_ = bytes;
    return true;
  }
  void Free() {
    if (mapped_bytes_ != 0)
      ::munmap(data_, mapped_bytes_);
    else if (data_ != nullptr)
      ::operator delete(data_, std::align_val_t(kDeviceAlignment));
    data_ = nullptr;
    size_ = 0;
    mapped_bytes_ = 0;
  }
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_bytes_ = 0;  // nonzero: data_ is an mmap of this many bytes
};

}  // namespace tfpopef
