// C++ tests of runtime internals the Python API cannot reach: the SPSC ring buffer, the
// QueueManager's blocking, a kernel failing at run time (it must fail every request of its
// batch while the runner keeps serving) and the requests' Timing. Built and run by
// test_runtime_core_cc.py against libtfpopef_runtime.so; argv[1] is a PopEF whose main step is
// the test-only op below.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/runtime/cc/check.h"
#include "tf_popef_op/runtime/cc/base/ring_buffer.h"
#include "tf_popef_op/runtime/cc/core/model_runner.h"
#include "tf_popef_op/runtime/cc/core/queue_manager.h"
#include "tf_popef_op/runtime/cc/kernels/kernel.h"

using namespace tfpopef;


namespace {

// Copies X to Y, but throws when X holds a negative value: a kernel error at run time.
class FailIfNegative final : public Kernel {
 public:
  FailIfNegative(size_t n, std::string where) : n_(n), where_(std::move(where)) {}
  void Run(const KernelContext& ctx) const override {
    const float* x = static_cast<const float*>(ctx.inputs[0]);
    for (size_t i = 0; i < n_; ++i)
      if (x[i] < 0) throw Error(ErrorCode::kInvalidArgument, where_ + ": negative value " + std::to_string(x[i]));
    std::memcpy(ctx.outputs[0], x, n_ * sizeof(float));
  }

 private:
  size_t n_;
  std::string where_;
};

TFPOPEF_REGISTER_KERNEL("TestFailIfNegative", [](const KernelSpec& spec) -> std::unique_ptr<Kernel> {
  return std::make_unique<FailIfNegative>(static_cast<size_t>(spec.inputs.at(0).numel()), spec.Where());
});

void TestRingBufferOrder() {
  RingBuffer<uint64_t> ring(7);  // not a power of two on purpose
  constexpr uint64_t kCount = 200000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kCount; ++i)
      while (!ring.TryPush(i)) std::this_thread::yield();
  });
  uint64_t expected = 0;
  bool in_order = true;
  while (expected < kCount) {
    uint64_t v;
    if (!ring.TryPop(&v)) {
      std::this_thread::yield();
      continue;
    }
    in_order = in_order && v == expected;
    ++expected;
  }
  producer.join();
  CHECK(in_order);
  CHECK(ring.Empty());
  CHECK(!ring.TryPop(&expected));
}

void TestRingBufferFull() {
  RingBuffer<int> ring(2);
  CHECK(ring.TryPush(1));
  CHECK(ring.TryPush(2));
  CHECK(!ring.TryPush(3));
  CHECK(ring.FreeSlots() == 0 && ring.Size() == 2);
  CHECK(*ring.Front() == 1);
  int v = 0;
  CHECK(ring.TryPop(&v) && v == 1);
  CHECK(ring.TryPush(3));
  CHECK(ring.TryPop(&v) && v == 2);
  CHECK(ring.TryPop(&v) && v == 3);
}

void TestQueueManagerBlocksWhenFull() {
  QueueManager queues({{"X", 1}}, 4, /*thread_safe=*/true);
  std::atomic<int> enqueued{0};
  int requests[3] = {0, 1, 2};
  std::thread producer([&] {
    for (int& r : requests) {
      const int q = 0;
      QueueEntry e{&r, 1, &r};
      if (!queues.Enqueue(&r, &q, &e, 1)) return;
      ++enqueued;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(enqueued.load() == 1);  // the anchor ring holds one entry: the producer waits
  for (int i = 0; i < 3; ++i) {
    void* r = queues.WaitFront(QueueManager::Clock::now() + std::chrono::seconds(10));
    CHECK(r == &requests[i]);
    CHECK(queues.PopRequest() == &requests[i]);
    CHECK(queues.PopEntry(0).data == &requests[i]);
  }
  producer.join();
  CHECK(enqueued.load() == 3);
  // An empty queue times out instead of waiting forever.
  const auto start = QueueManager::Clock::now();
  CHECK(queues.WaitFront(start + std::chrono::milliseconds(20)) == nullptr);
  CHECK(QueueManager::Clock::now() - start >= std::chrono::milliseconds(20));
}

void TestCloseWakesBlockedProducer() {
  QueueManager queues({{"X", 1}}, 1, true);
  int a = 0, b = 1;
  const int q = 0;
  QueueEntry ea{&a, 1, &a}, eb{&b, 1, &b};
  CHECK(queues.Enqueue(&a, &q, &ea, 1));
  std::atomic<int> result{-1};
  std::thread producer([&] { result = queues.Enqueue(&b, &q, &eb, 1) ? 1 : 0; });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(result.load() == -1);  // blocked on the full rings
  queues.Close();
  producer.join();
  CHECK(result.load() == 0);  // refused, nothing enqueued
  CHECK(queues.PopRequest() == &a);
  CHECK(queues.Front() == nullptr);
}

std::shared_ptr<Request> Submit(ModelRunner& runner, std::vector<float>& x) {
  return runner.ExecuteAsync({{"X", DType::kFloat32, {static_cast<int64_t>(x.size() / 2), 2}, x.data()}});
}

void TestKernelErrorFailsItsBatchOnly(const char* path) {
  RuntimeConfig cfg;
  cfg.batching_dim = 0;
  cfg.timeout_ns = 2'000'000'000;  // long: the four requests below are packed into one batch
  auto runner = ModelRunner::FromFile(path, cfg);
  std::vector<std::vector<float>> xs = {{1, 2}, {3, 4}, {-5, 6}, {7, 8}};
  std::vector<std::shared_ptr<Request>> batch;
  for (auto& x : xs) batch.push_back(Submit(*runner, x));
  for (auto& r : batch) {
    CHECK(r->WaitFor(std::chrono::seconds(30)));
    CHECK(r->error() != nullptr);
    if (r->error()) {
      CHECK(r->error()->code() == ErrorCode::kInvalidArgument);
      CHECK(std::string(r->error()->what()).find("running op 'TestFailIfNegative' (node 'guard')") != std::string::npos);
      CHECK(std::string(r->error()->what()).find("negative value -5") != std::string::npos);
    }
  }
  // A request spanning two batches fails when its second batch fails.
  std::vector<float> spanning = {1, 1, 2, 2, 3, 3, 4, 4, 5, 5, -6, 6, 7, 7, 8, 8};
  auto span = Submit(*runner, spanning);
  CHECK(span->WaitFor(std::chrono::seconds(30)) && span->error() != nullptr);
  // The runner keeps serving.
  std::vector<float> good = {1, 2, 3, 4, 5, 6, 7, 8};
  auto ok = Submit(*runner, good);
  CHECK(ok->WaitFor(std::chrono::seconds(30)));
  CHECK(ok->error() == nullptr);
  if (!ok->error()) CHECK(std::memcmp(ok->outputs()[0].data, good.data(), good.size() * sizeof(float)) == 0);
  const RunnerStats s = runner->stats();
  CHECK(s.failed_requests == 5);
  CHECK(s.multi_request_batches >= 1);
}

// Queue time runs until the request's first batch starts (the wait for the batch to fill
// included); the requests of a shared batch share its compute times; a failed batch's
// requests are timed too.
void TestRequestTiming(const char* path) {
  constexpr int64_t kDelayNs = 50'000'000;
  RuntimeConfig cfg;
  cfg.batching_dim = 0;
  cfg.timeout_ns = kDelayNs;  // two 1-row requests never fill the 4-row batch: it waits this long
  auto runner = ModelRunner::FromFile(path, cfg);
  std::vector<float> first = {1, 2}, second = {3, 4};
  auto a = Submit(*runner, first);
  auto b = Submit(*runner, second);
  CHECK(a->WaitFor(std::chrono::seconds(30)) && b->WaitFor(std::chrono::seconds(30)));
  CHECK(a->error() == nullptr && b->error() == nullptr);
  const Request::Timing& ta = a->timing();
  const Request::Timing& tb = b->timing();
  CHECK(ta.batches == 1 && tb.batches == 1);
  CHECK(ta.queue_ns() >= kDelayNs);
  CHECK(tb.enqueued_ns >= ta.enqueued_ns && tb.queue_ns() <= ta.queue_ns());
  CHECK(ta.started_ns == tb.started_ns);
  CHECK(ta.infer_ns > 0 && ta.input_ns >= 0 && ta.output_ns >= 0);
  CHECK(ta.input_ns == tb.input_ns && ta.infer_ns == tb.infer_ns && ta.output_ns == tb.output_ns);
  for (const Request::Timing* t : {&ta, &tb})
    CHECK(t->queue_ns() + t->input_ns + t->infer_ns + t->output_ns <= t->total_ns());

  // Batching off: a 2-batch request runs twice, its compute times summed.
  auto unbatched = ModelRunner::FromFile(path);
  std::vector<float> rows8 = {1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8};
  auto two = Submit(*unbatched, rows8);
  CHECK(two->WaitFor(std::chrono::seconds(30)) && two->error() == nullptr);
  CHECK(two->timing().batches == 2 && two->timing().infer_ns > 0);
  CHECK(two->timing().queue_ns() + two->timing().infer_ns <= two->timing().total_ns());

  std::vector<float> bad = {-1, 1, 1, 1, 1, 1, 1, 1};
  auto failed = Submit(*unbatched, bad);
  CHECK(failed->WaitFor(std::chrono::seconds(30)) && failed->error() != nullptr);
  CHECK(failed->timing().batches == 1 && failed->timing().infer_ns > 0);
  CHECK(failed->timing().done_ns >= failed->timing().started_ns);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FAIL_IF_NEGATIVE.popef\n", argv[0]);
    return 2;
  }
  TestRingBufferOrder();
  TestRingBufferFull();
  TestQueueManagerBlocksWhenFull();
  TestCloseWakesBlockedProducer();
  TestKernelErrorFailsItsBatchOnly(argv[1]);
  TestRequestTiming(argv[1]);
  if (failures == 0) std::printf("all runtime core tests passed\n");
  return failures == 0 ? 0 : 1;
}
