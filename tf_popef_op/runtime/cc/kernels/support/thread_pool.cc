// Workers take chunks of the oldest unfinished job, from their home range first (below). After
// a job they spin briefly for the next one before sleeping: a network runs hundreds of short
// kernels back to back, and a condition-variable wake-up (tens of microseconds on a busy
// machine) would cost more than many of those kernels.
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TFPOPEF_CPU_RELAX() _mm_pause()
#else
#define TFPOPEF_CPU_RELAX() std::this_thread::yield()
#endif

#include "tf_popef_op/runtime/cc/base/error.h"

namespace tfpopef {
namespace kernels {
namespace {

constexpr auto kWorkerSpin = std::chrono::microseconds(200);
// ParallelFor's chunks per thread: handed out one at a time, so a thread that starts late or
// runs slower (a core shared with another process) leaves its share to the others, instead of
// the whole op waiting for its one static half (ResNet50 b8, 2 threads: p90 latency 1.15x
// onnxruntime's with dynamic chunks against 1.39x with a static split; docs/benchmarks.md).
constexpr int64_t kChunksPerThread = 4;

// Each thread has a home range of a job's chunks: thread t of T the t-th contiguous share,
// which kernels order as the t-th band of rows (batch 1) or group of images (batch 8). A thread
// runs its own range front to back, then takes chunks from the back of the others' ranges, so
// the rows a core wrote in one step are mostly the rows it reads in the next, from its own L2,
// while a thread that starts late (its core shared with another process) still leaves its
// share to the others.
constexpr int kMaxHomes = 16;  // more threads share ranges (thread t uses range t % kMaxHomes)

// The pool's index of the calling thread: 0 for any thread that is not one of its workers.
thread_local int tls_home = 0;

struct Job {
  const std::function<void(int64_t, int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  int64_t chunks = 0;
  int homes = 1;
  // Per home range: (front << 32) | back, the chunks [front, back) not yet claimed.
  std::atomic<uint64_t> range[kMaxHomes];
  std::atomic<int64_t> claimed{0};
  std::atomic<int> users{0};  // workers inside RunChunks; the job lives on its caller's stack
  std::mutex error_mu;
  std::exception_ptr error;

  static uint64_t Pack(int64_t front, int64_t back) {
    return static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(back);
  }

  // (Ranges hold chunk numbers, at most kChunksPerThread per thread, so 32 bits each suffice.)
  // Fewer chunks than threads: chunk t is thread t's, and the threads past them share ranges.
  void Start(int num_threads) {
    homes = static_cast<int>(std::min<int64_t>(std::min(num_threads, kMaxHomes), chunks));
    for (int h = 0; h < homes; ++h)
      range[h].store(Pack(chunks * h / homes, chunks * (h + 1) / homes), std::memory_order_relaxed);
  }

  bool Exhausted() const { return claimed.load(std::memory_order_relaxed) >= chunks; }

  // A chunk of range h, from its front (its owner) or its back (another thread); -1 if empty.
  int64_t Claim(int h, bool front) {
    uint64_t r = range[h].load(std::memory_order_relaxed);
    while (true) {
      const int64_t f = static_cast<int64_t>(r >> 32), b = static_cast<int64_t>(r & 0xffffffffu);
      if (f >= b) return -1;
      const uint64_t next_r = front ? Pack(f + 1, b) : Pack(f, b - 1);
      if (range[h].compare_exchange_weak(r, next_r, std::memory_order_relaxed)) {
        claimed.fetch_add(1, std::memory_order_relaxed);
        return front ? f : b - 1;
      }
    }
  }

  void RunChunks() {
    const int home = tls_home % homes;
    for (int64_t c; (c = Claim(home, true)) >= 0;) Run(c);
    for (int k = 1; k < homes; ++k)
      for (int64_t c; (c = Claim((home + k) % homes, false)) >= 0;) Run(c);
  }

  void Run(int64_t c) {
    try {
      (*fn)(c, n * c / chunks, n * (c + 1) / chunks);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
    }
  }
};

}  // namespace

int ThreadCountFromEnvironment() {
  const char* text = std::getenv("TF_POPEF_NUM_THREADS");
  if (text == nullptr || *text == '\0') return std::max(1u, std::thread::hardware_concurrency());
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 1 || value > 1024)
    throw Error(ErrorCode::kInvalidArgument,
                "TF_POPEF_NUM_THREADS=\"" + std::string(text) + "\": expected an integer in 1..1024");
  return static_cast<int>(value);
}

struct ThreadPool::Impl {
  int num_threads = 1;
  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Job*> jobs;                 // guarded by mu; oldest first, capacity reserved up front
  std::atomic<int64_t> pushes{0};         // jobs ever queued (written under mu), read while spinning
  bool stop = false;

  // The oldest job that still has chunks to hand out, or nullptr. Requires mu. (Exhausted jobs
  // stay queued until their caller takes them off: it owns them.)
  Job* NextJob() {
    for (Job* job : jobs)
      if (!job->Exhausted()) return job;
    return nullptr;
  }

  void WorkerLoop() {
    int64_t seen = 0;  // pushes when this worker last looked at the queue
    while (true) {
      // Spin for a job pushed since the last look, not for an empty queue: a worker that
      // finishes its chunks while the caller still runs its own finds that job queued but
      // exhausted, and sleeping on it until the next job's notify would put a wake-up
      // (tens of microseconds) in front of that job, the case at batch 1 where each step is
      // one chunk per thread.
      const auto spin_until = std::chrono::steady_clock::now() + kWorkerSpin;
      bool spun_out = false;
      for (int i = 0; pushes.load(std::memory_order_relaxed) == seen; ++i) {
        if ((i & 63) == 0 && std::chrono::steady_clock::now() > spin_until) {
          spun_out = true;
          break;
        }
        TFPOPEF_CPU_RELAX();
      }
      Job* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu);
        seen = pushes.load(std::memory_order_relaxed);
        job = NextJob();
        if (job == nullptr && !spun_out && !stop) continue;  // its chunks were all taken: spin on
        if (job == nullptr) {
          cv.wait(lock, [&] { return stop || (job = NextJob()) != nullptr; });
          seen = pushes.load(std::memory_order_relaxed);
        }
        if (!job) return;  // stopping with nothing left to do
        job->users.fetch_add(1, std::memory_order_relaxed);  // under mu: the caller cannot have left
      }
      job->RunChunks();
      job->users.fetch_sub(1, std::memory_order_release);  // the last touch of the job
    }
  }
};

ThreadPool& ThreadPool::Global() {
  static ThreadPool* const pool = new ThreadPool(ThreadCountFromEnvironment());  // never destroyed:
  return *pool;  // kernels may still run from other static destructors at exit
}

ThreadPool::ThreadPool(int num_threads) : impl_(std::make_unique<Impl>()) {
  impl_->num_threads = std::max(1, num_threads);
  impl_->jobs.reserve(256);  // concurrent jobs (callers x nesting): no allocation on the hot path
  for (int i = 1; i < impl_->num_threads; ++i)
    impl_->workers.emplace_back([this, i] {
      tls_home = i;
      impl_->WorkerLoop();
    });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  for (auto& t : impl_->workers) t.join();
}

int ThreadPool::num_threads() const { return impl_->num_threads; }

int64_t ThreadPool::NumChunks(int64_t n, int64_t grain) const {
  if (n <= 0) return 0;
  grain = std::max<int64_t>(1, grain);
  return std::max<int64_t>(1, std::min<int64_t>(n / grain, impl_->num_threads));
}

void ThreadPool::ParallelForChunks(int64_t n, int64_t grain,
                                   const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  RunChunks(n, NumChunks(n, grain), fn);
}

void ThreadPool::RunChunks(int64_t n, int64_t chunks, const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  if (chunks == 0) return;
  if (chunks == 1) {
    fn(0, 0, n);
    return;
  }
  // The job lives on this stack frame (no allocation per call): workers register in `users`
  // under the lock while it is queued, and it is taken off the queue before waiting for them.
  Job job;
  job.fn = &fn;
  job.n = n;
  job.chunks = chunks;
  job.Start(impl_->num_threads);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->jobs.push_back(&job);
    impl_->pushes.fetch_add(1, std::memory_order_relaxed);
  }
  impl_->cv.notify_all();
  job.RunChunks();  // the caller works on, so the job finishes even if no worker is free
  {
    // Every chunk is handed out: take the job off the queue, so no new worker can join it.
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->jobs.erase(std::find(impl_->jobs.begin(), impl_->jobs.end(), &job));
  }
  // Workers that joined finish their chunks before leaving, so users == 0 means all are done.
  while (job.users.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  if (job.error) std::rethrow_exception(job.error);
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t most = impl_->num_threads == 1 ? 1 : impl_->num_threads * kChunksPerThread;  // 1: all on the caller
  const int64_t chunks = n <= 0 ? 0 : std::max<int64_t>(1, std::min(n / std::max<int64_t>(1, grain), most));
  RunChunks(n, chunks, [&fn](int64_t, int64_t begin, int64_t end) { fn(begin, end); });
}

}  // namespace kernels
}  // namespace tfpopef
