#include "tf_popef_op/op/cc/kernels/shared_runners.h"

#include <stdlib.h>

#include <climits>
#include <map>
#include <mutex>

namespace tfpopef {
namespace {

struct Table {
  std::mutex mu;
  std::map<std::string, std::weak_ptr<ModelRunner>> runners;
};

Table& GetTable() {
  static Table* table = new Table();  // never destroyed: kernels may outlive static destruction
  return *table;
}

// The file's canonical path; the path as given when it cannot be resolved (the runtime then
// reports the missing file with the right code).
std::string CanonicalPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

std::string Key(const std::string& canonical, const RuntimeConfig& c) {
  return canonical + "\n" + std::to_string(c.batching_dim) + "\n" + std::to_string(c.timeout_ns) + "\n" +
         std::to_string(c.validate_io_params) + "\n" + std::to_string(c.ring_buffer_size_multiplier) + "\n" +
         std::to_string(c.thread_safe) + "\n" + std::to_string(c.device_id);
}

}  // namespace

std::shared_ptr<ModelRunner> SharedRunners::Get(const std::string& popef_path, const RuntimeConfig& config) {
  const std::string canonical = CanonicalPath(popef_path);
  Table& t = GetTable();
  std::lock_guard<std::mutex> lock(t.mu);
  std::weak_ptr<ModelRunner>& slot = t.runners[Key(canonical, config)];
  if (std::shared_ptr<ModelRunner> runner = slot.lock()) return runner;
  std::shared_ptr<ModelRunner> runner = ModelRunner::FromFile(canonical, config);
  slot = runner;
  return runner;
}

size_t SharedRunners::LiveCount() {
  Table& t = GetTable();
  std::lock_guard<std::mutex> lock(t.mu);
  size_t n = 0;
  for (const auto& entry : t.runners) n += entry.second.expired() ? 0 : 1;
  return n;
}

}  // namespace tfpopef
