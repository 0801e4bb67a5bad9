// The intra-op thread pool: one per process, shared by every kernel of every session, so
// kernels never create threads and concurrent sessions do not oversubscribe the cores.
//
// Size: TF_POPEF_NUM_THREADS if set (1 = everything runs on the calling thread), otherwise the
// number of cores. The calling thread always takes part in its own ParallelFor, so a pool of
// size T has T - 1 worker threads, and a ParallelFor issued from inside another one (or from
// several sessions at once) cannot deadlock: the caller alone can finish its own work.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace tfpopef {
namespace kernels {

class ThreadPool {
 public:
  // The process-wide pool (created on first use).
  static ThreadPool& Global();

  // num_threads >= 1 counts the calling thread.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const;

  // Calls fn(begin, end) on disjoint ranges covering [0, n), each at least `grain` items long
  // (except when n < grain), in at most a few chunks per thread that the threads take one at a
  // time, and returns when all are done. The first exception thrown by fn is rethrown here
  // after every chunk has finished.
  //
  // Home ranges: of T threads, the calling thread first runs the chunks of the first T-th of
  // [0, n) in order, worker t those of the t-th, and a thread done with its own takes chunks
  // from the far end of another's. So a kernel that orders its items by band of rows (or by
  // image) gives each core the same pixels from step to step, which then stay in its L2, and a
  // thread that starts late still leaves its share to the others. ParallelForChunks the same,
  // chunk t being thread t's.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // As ParallelFor, and fn also gets the chunk number in [0, NumChunks(n, grain)), for kernels
  // that give each chunk its own slice of scratch memory.
  void ParallelForChunks(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int64_t)>& fn);

  // The number of chunks ParallelFor(n, grain, ...) uses: min(floor(n / grain), num_threads()),
  // at least 1 when n > 0 (so every chunk gets at least `grain` items).
  int64_t NumChunks(int64_t n, int64_t grain) const;

 private:
  // fn(chunk, begin, end) on `chunks` near-equal ranges of [0, n).
  void RunChunks(int64_t n, int64_t chunks, const std::function<void(int64_t, int64_t, int64_t)>& fn);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Work per chunk below which a kernel stays on the calling thread: handing a chunk to a worker
// costs a few microseconds (more on a busy machine), so each chunk must carry more than that.
// Set from the per-element costs measured on the 2-core machines (one chunk ≈ 10-20 µs of work;
// docs/benchmarks.md, kernel benchmarks; re-check on an idle machine):
//   kStreamingGrain  elements of a memory-bound loop (copy, add, relu, cast: ~0.1-0.5 ns each)
//   kMathGrain       elements of a vectorized transcendental loop (exp, tanh, erf: 1-5 ns each)
constexpr int64_t kStreamingGrain = 32768;
constexpr int64_t kMathGrain = 4096;

// How many items of `item_elements` elements each make up at least `grain_elements` (>= 1).
inline int64_t ItemsPerChunk(int64_t item_elements, int64_t grain_elements) {
  return item_elements <= 0 ? grain_elements : (grain_elements + item_elements - 1) / item_elements;
}

// Reads TF_POPEF_NUM_THREADS (unset or empty: the number of cores); throws kInvalidArgument
// naming the variable for anything but an integer in 1..1024. Global() sizes itself with it.
int ThreadCountFromEnvironment();

// Shorthand for ThreadPool::Global().ParallelFor. Allocation-free for the callable: it is
// passed by reference (std::ref fits std::function's inline storage, whereas a kernel's [&]
// lambda usually does not), and work of a single chunk runs inline without the pool
// (tests/runtime/test_runtime_no_alloc.py counts allocations on the execute path).
template <typename Fn>
inline void ParallelFor(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (n <= grain) {
    fn(int64_t{0}, n);
    return;
  }
  ThreadPool::Global().ParallelFor(n, grain, std::function<void(int64_t, int64_t)>(std::ref(fn)));
}

// Shorthand for ThreadPool::Global().ParallelForChunks, allocation-free in the same way.
template <typename Fn>
inline void ParallelForChunks(int64_t n, int64_t grain, Fn&& fn) {
  ThreadPool::Global().ParallelForChunks(n, grain, std::function<void(int64_t, int64_t, int64_t)>(std::ref(fn)));
}

}  // namespace kernels
}  // namespace tfpopef
