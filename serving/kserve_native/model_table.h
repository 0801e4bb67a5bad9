// Which v2 (name, version) the fast path answers: a snapshot the Python server publishes
// whenever versions load or unload, swapped atomically, so a request sees one consistent
// table without a lock. The statistics Counters outlive publications (a model's counts stay
// after it unloads, as the Python server's do).
//
// Thread safety: Find/Publish/Statistics from any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "served_model.h"

namespace tfpopef {
namespace kserve {

class ModelTable {
 public:
  struct Versions {
    std::string default_version;  // the version an empty model_version means ("" : none here)
    std::unordered_map<std::string, std::shared_ptr<const ServedModel>> by_version;
  };
  using Table = std::unordered_map<std::string, Versions>;  // by v2 model name

  // The version a request asks for, or null when the fast path does not serve it.
  std::shared_ptr<const ServedModel> Find(const std::string& name, const std::string& version) const;

  void Publish(Table table);

  // The Counters of (v2 name, version), created on first use.
  std::shared_ptr<Counters> CountersOf(const std::string& name, const std::string& version,
                                       const std::string& model);

  struct CountedModel {
    std::string name, version, model;
    std::shared_ptr<const Counters> counters;
  };
  std::vector<CountedModel> Counted() const;

 private:
  std::shared_ptr<const Table> table_ = std::make_shared<Table>();  // std::atomic_load/store

  mutable std::mutex counters_mu_;
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::shared_ptr<Counters>>> counters_;
};

}  // namespace kserve
}  // namespace tfpopef
