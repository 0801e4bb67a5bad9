// C++ tests of AlignedBuffer's placement: small buffers on aligned operator new; large
// long-lived ones (Pages::kHugeIfLarge, >= 2 MiB) as their own 2 MiB-aligned mapping advised
// MADV_HUGEPAGE, ending at their last 4 KiB page; the fallback to operator new when the
// mapping fails or TF_POPEF_HUGE_PAGES=0; zero size; moves; the Device's arena. Built and run
// by test_runtime_aligned_buffer.py against libtfpopef_runtime.so.
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cc/scoped_env.h"
#include "tests/runtime/cc/check.h"
#include "tf_popef_op/runtime/cc/base/aligned_buffer.h"
#include "tf_popef_op/runtime/cc/core/device.h"

using namespace tfpopef;
using Pages = AlignedBuffer::Pages;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool Aligned(const void* p, size_t alignment) { return reinterpret_cast<uintptr_t>(p) % alignment == 0; }

// This kernel has transparent huge pages (madvise succeeds) and does not disable them.
bool ThpAvailable() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return !mode.empty() && mode.find("[never]") == std::string::npos;
}

// AnonHugePages (kB) of the mapping that holds `p`, from /proc/self/smaps; -1 when not found.
long AnonHugeKb(const void* p) {
  std::ifstream f("/proc/self/smaps");
  std::string line;
  bool inside = false;
  const auto a = reinterpret_cast<uintptr_t>(p);
  while (std::getline(f, line)) {
    unsigned long lo, hi;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = lo <= a && a < hi;
    } else if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      return std::stol(line.substr(14));
    }
  }
  return -1;
}

// The 4 KiB page at `p` is not mapped (mincore fails with ENOMEM).
bool Unmapped(const void* p) {
  unsigned char vec;
  return ::mincore(const_cast<void*>(p), 4096, &vec) != 0 && errno == ENOMEM;
}

bool AllZero(const AlignedBuffer& b) {
  for (size_t i = 0; i < b.size(); ++i)
    if (b.data()[i] != 0) return false;
  return true;
}

void FillAndCheck(AlignedBuffer& b) {
  for (size_t i = 0; i < b.size(); ++i) b.data()[i] = static_cast<uint8_t>(i * 7 + 3);
  bool same = true;
  for (size_t i = 0; i < b.size(); ++i) same = same && b.data()[i] == static_cast<uint8_t>(i * 7 + 3);
  CHECK(same);
}

void TestZeroSize() {
  for (Pages pages : {Pages::kSmall, Pages::kHugeIfLarge}) {
    AlignedBuffer b(0, true, pages);
    CHECK(b.data() == nullptr && b.size() == 0 && !b.huge_pages());
    b.Resize(3 * kMiB, false, pages);
    b.Resize(0, false, pages);  // frees whatever it held
    CHECK(b.data() == nullptr && b.size() == 0 && !b.huge_pages());
  }
}

void TestSmallBuffersStayOnOperatorNew() {
  test::ScopedEnv env("TF_POPEF_HUGE_PAGES", nullptr);
  for (size_t size : {size_t{1}, size_t{64}, size_t{1000}, kMiB, kHugePageBytes - 1}) {
    AlignedBuffer b(size, true, Pages::kHugeIfLarge);
    CHECK(b.size() == size && !b.huge_pages());
    CHECK(Aligned(b.data(), kDeviceAlignment));
    CHECK(AllZero(b));
    FillAndCheck(b);
  }
  AlignedBuffer large_small_pages(8 * kMiB, true, Pages::kSmall);  // e.g. a request's output
  CHECK(!large_small_pages.huge_pages() && Aligned(large_small_pages.data(), kDeviceAlignment));
  CHECK(AllZero(large_small_pages));
}

void TestLargeBuffersOnHugePages() {
  test::ScopedEnv env("TF_POPEF_HUGE_PAGES", nullptr);
  const bool thp = ThpAvailable();
  for (size_t size : {kHugePageBytes, 5 * kMiB + 123, 16 * kMiB}) {
    for (bool zeroed : {false, true}) {
      AlignedBuffer b(size, zeroed, Pages::kHugeIfLarge);
      CHECK(b.size() == size && Aligned(b.data(), kDeviceAlignment));
      CHECK(AllZero(b));  // a fresh mapping is zero even unasked; operator new's memory when asked
      if (!thp) {
        CHECK(!b.huge_pages());  // madvise(MADV_HUGEPAGE) unavailable: the operator new fallback
        continue;
      }
      CHECK(b.huge_pages());
      CHECK(Aligned(b.data(), kHugePageBytes));
      FillAndCheck(b);
      // Not rounded up to 2 MiB: the mapping ends at the buffer's last 4 KiB page.
      CHECK(Unmapped(b.data() + AlignUp(size, 4096)));
      if (size >= 2 * kHugePageBytes && zeroed)
        std::printf("%zu bytes: AnonHugePages %ld kB\n", size, AnonHugeKb(b.data()));
    }
  }
  if (thp) {
    // A whole 2 MiB page written through: with THP in madvise mode the kernel backs the advised
    // mapping with at least one huge page (defrag on madvise compacts for it).
    AlignedBuffer b(16 * kMiB, false, Pages::kHugeIfLarge);
    FillAndCheck(b);
    CHECK(AnonHugeKb(b.data()) >= 2048);
  }
}

void TestDisabledByEnvironment() {
  test::ScopedEnv env("TF_POPEF_HUGE_PAGES", "0");
  AlignedBuffer b(6 * kMiB, true, Pages::kHugeIfLarge);
  CHECK(b.size() == 6 * kMiB && !b.huge_pages() && Aligned(b.data(), kDeviceAlignment));
  CHECK(AllZero(b));
  FillAndCheck(b);
}

long VmSizeBytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmSize:", 0) == 0) return std::stol(line.substr(7)) * 1024;
  return -1;
}

// Address space for the buffer itself but not for the extra huge page the aligned mapping
// reserves: the mapping fails and the buffer silently comes from operator new. With no room
// even for that, the allocation is kResourceExhausted.
void TestFallbackWhenTheMappingFails() {
  test::ScopedEnv env("TF_POPEF_HUGE_PAGES", nullptr);
  rlimit old;
  CHECK(::getrlimit(RLIMIT_AS, &old) == 0);
  const size_t size = 64 * kMiB;
  {
    AlignedBuffer b;
    rlimit tight = old;
    tight.rlim_cur = static_cast<rlim_t>(VmSizeBytes()) + size + kMiB;
    CHECK(::setrlimit(RLIMIT_AS, &tight) == 0);
    bool threw = false;
    try {
      b.Resize(size, true, Pages::kHugeIfLarge);
    } catch (const Error&) {
      threw = true;
    }
    CHECK(::setrlimit(RLIMIT_AS, &old) == 0);
    CHECK(!threw);
    CHECK(b.size() == size && !b.huge_pages() && Aligned(b.data(), kDeviceAlignment));
    CHECK(b.data()[0] == 0 && b.data()[size - 1] == 0);
  }
  {
    AlignedBuffer b;
    rlimit none = old;
    none.rlim_cur = static_cast<rlim_t>(VmSizeBytes()) + kMiB;
    CHECK(::setrlimit(RLIMIT_AS, &none) == 0);
    bool exhausted = false;
    try {
      b.Resize(size, false, Pages::kHugeIfLarge);
    } catch (const Error& e) {
      exhausted = e.code() == ErrorCode::kResourceExhausted;
    }
    CHECK(::setrlimit(RLIMIT_AS, &old) == 0);
    CHECK(exhausted && b.data() == nullptr && b.size() == 0);
  }
}

void TestMoves() {
  test::ScopedEnv env("TF_POPEF_HUGE_PAGES", nullptr);
  AlignedBuffer a(4 * kMiB, false, Pages::kHugeIfLarge);
  const bool huge = a.huge_pages();
  uint8_t* p = a.data();
  p[0] = 42;
  AlignedBuffer b(std::move(a));
  CHECK(a.data() == nullptr && a.size() == 0 && !a.huge_pages());
  CHECK(b.data() == p && b.size() == 4 * kMiB && b.huge_pages() == huge && b.data()[0] == 42);
  AlignedBuffer c(100);
  c = std::move(b);  // frees c's small buffer, takes b's mapping
  CHECK(c.data() == p && c.huge_pages() == huge && b.data() == nullptr && !b.huge_pages());
  c = AlignedBuffer(100);  // unmaps the mapping
  CHECK(c.size() == 100 && !c.huge_pages());
}

void TestDeviceArenaOnHugePages() {
  test::ScopedEnv env("TF_POPEF_HUGE_PAGES", nullptr);
  Device d(0, "ipu2", uint64_t{1} << 30);
  auto lock = d.Lock();
  d.PrepareLoad(12 * kMiB, 24 * kMiB, 3 * kMiB);
  CHECK(Aligned(d.arena(), ThpAvailable() ? kHugePageBytes : kDeviceAlignment));
  CHECK(Aligned(d.weights(), ThpAvailable() ? kHugePageBytes : kDeviceAlignment));
  d.PrepareLoad(0, 1000, 0);  // smaller: kept, still valid
  CHECK(d.arena() != nullptr && d.weights() != nullptr);
}

}  // namespace

int main() {
  TestZeroSize();
  TestSmallBuffersStayOnOperatorNew();
  TestLargeBuffersOnHugePages();
  TestDisabledByEnvironment();
  TestFallbackWhenTheMappingFails();
  TestMoves();
  TestDeviceArenaOnHugePages();
  if (failures == 0) std::printf("all aligned buffer tests passed\n");
  return failures == 0 ? 0 : 1;
}
