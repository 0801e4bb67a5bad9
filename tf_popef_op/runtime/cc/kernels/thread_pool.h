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
  // (except when n < grain), in at most num_threads() chunks, and returns when all are done.
  // The first exception thrown by fn is rethrown here after every chunk has finished.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // As ParallelFor, and fn also gets the chunk number in [0, NumChunks(n, grain)), for kernels
  // that give each chunk its own slice of scratch memory.
  void ParallelForChunks(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int64_t)>& fn);

  // The number of chunks ParallelFor(n, grain, ...) uses: min(ceil(n / grain), num_threads()).
  int64_t NumChunks(int64_t n, int64_t grain) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Shorthand for ThreadPool::Global().ParallelFor.
inline void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  ThreadPool::Global().ParallelFor(n, grain, fn);
}

}  // namespace kernels
}  // namespace tfpopef
