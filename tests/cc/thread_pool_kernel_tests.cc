// The intra-op thread pool (kernels/support/thread_pool.h): every index of [0, n) exactly once for
// many n / grain / pool sizes, chunk bounds, exceptions, nested and concurrent ParallelFor,
// and the TF_POPEF_NUM_THREADS parsing. Run by the binary of kernel_tests.cc.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/cc/kernel_tester.h"
#include "tests/cc/scoped_env.h"
#include "tf_popef_op/runtime/cc/base/error.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace test {
namespace {

using kernels::ThreadPool;

// Checks one ParallelForChunks(n, grain) on `pool`: coverage, chunk count and sizes.
void CheckCoverage(ThreadPool& pool, int64_t n, int64_t grain) {
  const std::string where = "threads " + std::to_string(pool.num_threads()) + ", n " + std::to_string(n) +
                            ", grain " + std::to_string(grain);
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::mutex mu;
  std::set<int64_t> chunk_ids;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.ParallelForChunks(n, grain, [&](int64_t chunk, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    std::lock_guard<std::mutex> lock(mu);
    chunk_ids.insert(chunk);
    ranges.emplace_back(begin, end);
  });
  for (int64_t i = 0; i < n; ++i)
    if (hits[static_cast<size_t>(i)].load() != 1)
      return Fail(where + ": index " + std::to_string(i) + " ran " + std::to_string(hits[i].load()) + " times");
  const int64_t chunks = pool.NumChunks(n, grain);
  const int64_t expected =
      n <= 0 ? 0 : std::max<int64_t>(1, std::min<int64_t>(n / std::max<int64_t>(grain, 1), pool.num_threads()));
  if (chunks != expected) Fail(where + ": NumChunks " + std::to_string(chunks) + ", expected " + std::to_string(expected));
  if (static_cast<int64_t>(ranges.size()) != chunks || static_cast<int64_t>(chunk_ids.size()) != chunks)
    Fail(where + ": " + std::to_string(ranges.size()) + " calls with " + std::to_string(chunk_ids.size()) +
         " distinct chunk ids, expected " + std::to_string(chunks));
  for (int64_t id : chunk_ids)
    if (id < 0 || id >= chunks) Fail(where + ": chunk id " + std::to_string(id) + " out of range");
  for (const auto& r : ranges)
    if (r.second <= r.first || (n >= grain && r.second - r.first < grain))
      Fail(where + ": chunk [" + std::to_string(r.first) + ", " + std::to_string(r.second) + ") is shorter than the grain");
}

KERNEL_TEST(ThreadPool_CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 5}) {
    ThreadPool pool(threads);
    EXPECT_TRUE(pool.num_threads() == threads);
    for (int64_t n : {0, 1, 2, 3, 7, 8, 63, 64, 65, 1000, 4097})
      for (int64_t grain : {0, 1, 2, 3, 16, 1000, 5000}) CheckCoverage(pool, n, grain);
  }
  CheckCoverage(ThreadPool::Global(), 100000, kernels::kStreamingGrain);
  CheckCoverage(ThreadPool::Global(), 3, 1);
}

// ParallelFor hands out a few chunks per thread (so a late or slowed thread's share goes to the
// others): every index once, every chunk at least the grain, and no more than 4 per thread
// (a pool of one thread runs it as one chunk).
KERNEL_TEST(ThreadPool_ParallelForSplitsIntoFewChunksPerThread) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 7, 64, 1000, 4097})
      for (int64_t grain : {1, 3, 100}) {
        const std::string where = "threads " + std::to_string(threads) + ", n " + std::to_string(n) + ", grain " +
                                  std::to_string(grain);
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int64_t> calls{0}, short_chunks{0};
        pool.ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
          calls.fetch_add(1);
          if (n >= grain && end - begin < grain) short_chunks.fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i)
          if (hits[static_cast<size_t>(i)].load() != 1) Fail(where + ": index " + std::to_string(i) + " ran " +
                                                             std::to_string(hits[static_cast<size_t>(i)].load()) + " times");
        const int64_t want = threads == 1 ? 1 : std::max<int64_t>(1, std::min<int64_t>(n / grain, 4 * threads));
        if (calls.load() != want)
          Fail(where + ": " + std::to_string(calls.load()) + " chunks, expected " + std::to_string(want));
        if (short_chunks.load() != 0) Fail(where + ": a chunk shorter than the grain");
      }
  }
}

KERNEL_TEST(ThreadPool_SizeOneRunsOnTheCaller) {
  ThreadPool pool(1);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  pool.ParallelFor(1000, 1, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() != caller) elsewhere.fetch_add(1);
  });
  EXPECT_TRUE(elsewhere.load() == 0);
  EXPECT_TRUE(pool.NumChunks(1000, 1) == 1);
  EXPECT_TRUE(ThreadPool(0).num_threads() == 1);  // clamped
}

KERNEL_TEST(ThreadPool_ExceptionReachesTheCallerAfterAllChunks) {
  ThreadPool pool(3);
  std::atomic<int> finished{0};
  bool caught = false;
  try {
    pool.ParallelForChunks(300, 100, [&](int64_t chunk, int64_t, int64_t) {
      if (chunk == 1) throw std::runtime_error("chunk one failed");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      finished.fetch_add(1);
    });
  } catch (const std::runtime_error& e) {
    caught = std::string(e.what()) == "chunk one failed";
  }
  EXPECT_TRUE(caught);
  EXPECT_TRUE(finished.load() == 2);  // the other chunks ran to completion before the rethrow
  // The pool stays usable.
  std::atomic<int64_t> sum{0};
  pool.ParallelFor(1000, 10, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
  });
  EXPECT_TRUE(sum.load() == 999 * 1000 / 2);
  // A kernels::Error keeps its type and code.
  bool code_kept = false;
  try {
    pool.ParallelFor(10, 1, [](int64_t b, int64_t) {
      if (b == 0) throw Error(ErrorCode::kInvalidArgument, "bad input");
    });
  } catch (const Error& e) {
    code_kept = e.code() == ErrorCode::kInvalidArgument;
  }
  EXPECT_TRUE(code_kept);
}

KERNEL_TEST(ThreadPool_NestedParallelFor) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(64 * 100);
    pool.ParallelFor(64, 1, [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row)
        pool.ParallelFor(100, 7, [&](int64_t cb, int64_t ce) {
          for (int64_t c = cb; c < ce; ++c) hits[static_cast<size_t>(row * 100 + c)].fetch_add(1);
        });
    });
    int bad = 0;
    for (auto& h : hits) bad += h.load() != 1;
    EXPECT_TRUE(bad == 0);
  }
}

KERNEL_TEST(ThreadPool_ConcurrentCallers) {
  ThreadPool pool(3);
  constexpr int kCallers = 6, kCalls = 200;
  std::vector<int64_t> wrong(kCallers, 0);
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t)
    callers.emplace_back([&, t] {
      for (int call = 0; call < kCalls; ++call) {
        const int64_t n = 1 + (call * 37 + t * 11) % 2000;
        std::atomic<int64_t> sum{0};
        pool.ParallelFor(n, 16, [&](int64_t b, int64_t e) {
          int64_t local = 0;
          for (int64_t i = b; i < e; ++i) local += i;
          sum.fetch_add(local);
        });
        if (sum.load() != n * (n - 1) / 2) ++wrong[t];
      }
    });
  for (auto& c : callers) c.join();
  for (int t = 0; t < kCallers; ++t) EXPECT_TRUE(wrong[t] == 0);
}

// Back-to-back two-chunk jobs (a step at batch 1: one chunk per thread) where the worker always
// finishes first: the caller's chunk waits until the other chunk has run, so the worker finds its
// job queued but exhausted before the caller takes it off. It must still take the other chunk of
// every next job, and every index runs once.
KERNEL_TEST(ThreadPool_WorkerThatFinishesFirstTakesTheNextJobs) {
  ThreadPool pool(2);
  constexpr int kJobs = 300;
  int wrong = 0, caller_ran_both = 0;
  for (int job = 0; job < kJobs; ++job) {
    const std::thread::id caller = std::this_thread::get_id();
    std::atomic<int> other_done{0};
    std::atomic<int> hits[2] = {{0}, {0}};
    std::atomic<int> by_caller{0};
    pool.ParallelForChunks(2, 1, [&](int64_t chunk, int64_t, int64_t) {
      hits[chunk].fetch_add(1);
      if (std::this_thread::get_id() != caller) {
        other_done.store(1, std::memory_order_release);
        return;
      }
      by_caller.fetch_add(1);
      // Wait (bounded: the caller runs the other chunk itself if no worker comes) for the worker.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (other_done.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
    });
    wrong += hits[0].load() != 1 || hits[1].load() != 1;
    caller_ran_both += by_caller.load() == 2;
  }
  EXPECT_TRUE(wrong == 0);
  if (caller_ran_both > 0)
    Fail("the worker missed " + std::to_string(caller_ran_both) + " of " + std::to_string(kJobs) +
         " jobs (the caller waited 1 s for it, then ran its chunk)");
}

// Home ranges: with every thread present (each chunk waits, bounded, until all T threads have
// entered one), thread t's first chunk is the front of the t-th share of the chunks (the
// caller's chunk 0), and each thread runs its own share front to back.
KERNEL_TEST(ThreadPool_EachThreadStartsAtItsHomeRange) {
  for (int threads : {2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t chunks : {int64_t{threads}, int64_t{4} * threads}) {
      const std::string where = "threads " + std::to_string(threads) + ", chunks " + std::to_string(chunks);
      std::mutex mu;
      std::vector<std::pair<std::thread::id, int64_t>> order;  // (thread, chunk) as run
      std::atomic<int> entered{0};
      std::set<std::thread::id> seen;
      const std::thread::id caller = std::this_thread::get_id();
      pool.ParallelFor(chunks, 1, [&](int64_t begin, int64_t end) {
        EXPECT_TRUE(end == begin + 1);
        {
          std::lock_guard<std::mutex> lock(mu);
          order.emplace_back(std::this_thread::get_id(), begin);
          if (seen.insert(std::this_thread::get_id()).second) entered.fetch_add(1);
        }
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (entered.load() < threads && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      });
      if (entered.load() < threads) {
        Fail(where + ": only " + std::to_string(entered.load()) + " threads took part within 2 s");
        continue;
      }
      std::set<int64_t> firsts, homes;
      for (int t = 0; t < threads; ++t) homes.insert(chunks * t / threads);
      std::set<std::thread::id> started;
      for (const auto& [id, chunk] : order)
        if (started.insert(id).second) {
          firsts.insert(chunk);
          if (id == caller && chunk != 0) Fail(where + ": the caller started at chunk " + std::to_string(chunk));
        }
      if (firsts != homes) Fail(where + ": the threads' first chunks are not the fronts of their home ranges");
      // Within a home range, chunks run in ascending order by its owner.
      for (const auto& id : started) {
        int64_t last = -1, home = -1;
        for (const auto& [who, chunk] : order) {
          if (who != id) continue;
          if (home < 0) home = chunk;
          const int64_t share_end = chunks * ((home * threads / chunks) + 1) / threads;
          if (chunk >= home && chunk < share_end) {
            if (chunk <= last) Fail(where + ": a thread ran its own range out of order");
            last = chunk;
          }
        }
      }
    }
  }
}

// A thread done with its own share takes chunks from the far end of another's: the worker's
// first chunk (4 of 8) holds it (bounded) until the caller has run three chunks outside its own
// share, which must be 7, 6, 5 after its own 0, 1, 2, 3; every chunk runs once.
KERNEL_TEST(ThreadPool_ThreadsStealFromTheFarEnd) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mu;
  std::vector<int64_t> by_caller;
  std::atomic<int> stolen{0};
  std::atomic<int> hits[8] = {};
  pool.ParallelFor(8, 1, [&](int64_t begin, int64_t) {
    hits[begin].fetch_add(1);
    if (std::this_thread::get_id() == caller) {
      std::lock_guard<std::mutex> lock(mu);
      by_caller.push_back(begin);
      if (begin >= 4) stolen.fetch_add(1);
      return;
    }
    if (begin != 4) return;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (stolen.load() < 3 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  });
  for (int c = 0; c < 8; ++c) EXPECT_TRUE(hits[c].load() == 1);
  // The worker may not have come at all (then the caller ran chunk 4 last).
  const std::vector<int64_t> want = {0, 1, 2, 3, 7, 6, 5};
  std::vector<int64_t> got(by_caller.begin(), by_caller.begin() + std::min<size_t>(by_caller.size(), 7));
  if (got != want) {
    std::string text;
    for (int64_t c : by_caller) text += " " + std::to_string(c);
    Fail("the caller ran chunks" + text + ", expected 0 1 2 3 7 6 5 (then 4 if no worker came)");
  }
}

KERNEL_TEST(ThreadPool_SizeFromEnvironment) {
  {
    ScopedEnv env("TF_POPEF_NUM_THREADS", "1");
    EXPECT_TRUE(kernels::ThreadCountFromEnvironment() == 1);
  }
  {
    ScopedEnv env("TF_POPEF_NUM_THREADS", "7");
    EXPECT_TRUE(kernels::ThreadCountFromEnvironment() == 7);
  }
  for (const char* unset : {static_cast<const char*>(nullptr), ""}) {
    ScopedEnv env("TF_POPEF_NUM_THREADS", unset);
    EXPECT_TRUE(kernels::ThreadCountFromEnvironment() == static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  }
  for (const char* bad : {"0", "-2", "abc", "2x", "1.5", "5000"}) {
    ScopedEnv env("TF_POPEF_NUM_THREADS", bad);
    std::string message;
    ErrorCode code = ErrorCode::kInternal;
    try {
      kernels::ThreadCountFromEnvironment();
    } catch (const Error& e) {
      message = e.what();
      code = e.code();
    }
    EXPECT_TRUE(code == ErrorCode::kInvalidArgument);
    if (message != "TF_POPEF_NUM_THREADS=\"" + std::string(bad) + "\": expected an integer in 1..1024")
      Fail(std::string("TF_POPEF_NUM_THREADS=") + bad + " gave '" + message + "'");
  }
}

}  // namespace
}  // namespace test
}  // namespace tfpopef
