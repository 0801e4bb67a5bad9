// HomeRanges (kernels/support/home_ranges.h): owners claiming from their ranges' fronts and
// others from the backs hand out every item exactly once, whatever the claim sizes, the number of
// ranges and of threads; the owner starts at its range's first item; a range left alone (its
// owner never came) is emptied by the others. Run by the binary of kernel_tests.cc.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "tests/cc/kernel_tester.h"
#include "tf_popef_op/runtime/cc/kernels/support/home_ranges.h"

namespace tfpopef {
namespace test {
namespace {

using kernels::HomeRanges;

// `threads` threads, thread t owning range t % homes: the first `owners` run RunHome (their own
// range from the front, then the others' from the back), the rest claim every range from the back.
void CheckClaims(int64_t n, int64_t homes, int threads, int owners) {
  const std::string where = "n " + std::to_string(n) + ", homes " + std::to_string(homes) + ", threads " +
                            std::to_string(threads) + ", owners " + std::to_string(owners);
  HomeRanges ranges(n, homes);
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::vector<int64_t> first_claim(static_cast<size_t>(threads), -1);
  const auto front = [](int64_t f, int64_t b) { return std::min<int64_t>(5, (b - f + 1) / 2); };
  const auto back = [](int64_t f, int64_t b) { return std::min<int64_t>(3, std::max<int64_t>(1, (b - f) / 4)); };
  auto body = [&](int t) {
    const int64_t home = t % homes;
    auto take = [&](int64_t first, int64_t got) {
      if (first_claim[static_cast<size_t>(t)] < 0) first_claim[static_cast<size_t>(t)] = first;
      for (int64_t i = first; i < first + got; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    };
    if (t < owners) {
      ranges.RunHome(home, front, back, take);  // as the kernels run their shares
      return;
    }
    int64_t first = 0;
    for (int64_t i = 0; i < homes; ++i)
      for (int64_t got; (got = ranges.Claim((home + i) % homes, false, back, &first)) > 0;) take(first, got);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(body, t);
  body(0);
  for (auto& th : pool) th.join();
  for (int64_t i = 0; i < n; ++i)
    if (hits[static_cast<size_t>(i)].load() != 1) {
      Fail(where + ": item " + std::to_string(i) + " claimed " + std::to_string(hits[static_cast<size_t>(i)].load()) +
           " times");
      return;
    }
  // Alone, the owner of range 0 starts at item 0 (with other threads, they may have emptied it;
  // with fewer items than ranges, it may be empty).
  if (owners > 0 && threads == 1 && n >= homes && first_claim[0] != 0)
    Fail(where + ": the owner's first claim is not item 0");
}

KERNEL_TEST(HomeRanges_EveryItemClaimedOnce) {
  for (int64_t n : {1, 2, 7, 64, 171, 1000, 4096})
    for (int64_t homes : {1, 2, 3, 16})
      for (int threads : {1, 2, 4}) {
        CheckClaims(n, homes, threads, threads);  // every thread starts at its own range
        CheckClaims(n, homes, threads, 1);        // only thread 0 does: the others only take from the back
        CheckClaims(n, homes, threads, 0);        // nobody owns: everything is taken from the backs
      }
}

}  // namespace
}  // namespace test
}  // namespace tfpopef
