#include "model_table.h"

namespace tfpopef {
namespace kserve {

std::shared_ptr<const ServedModel> ModelTable::Find(const std::string& name, const std::string& version) const {
  const std::shared_ptr<const Table> table = std::atomic_load(&table_);
  const auto versions = table->find(name);
  if (versions == table->end()) return nullptr;
  const std::string& wanted = version.empty() ? versions->second.default_version : version;
  if (wanted.empty()) return nullptr;
  const auto found = versions->second.by_version.find(wanted);
  return found == versions->second.by_version.end() ? nullptr : found->second;
}

void ModelTable::Publish(Table table) {
  std::atomic_store(&table_, std::shared_ptr<const Table>(std::make_shared<Table>(std::move(table))));
}

std::shared_ptr<Counters> ModelTable::CountersOf(const std::string& name, const std::string& version,
                                                 const std::string& model) {
  std::lock_guard<std::mutex> lock(counters_mu_);
  auto& slot = counters_[{name, version}];
  if (!slot.second) slot = {model, std::make_shared<Counters>()};
  return slot.second;
}

std::vector<ModelTable::CountedModel> ModelTable::Counted() const {
  std::lock_guard<std::mutex> lock(counters_mu_);
  std::vector<CountedModel> out;
  for (const auto& [key, value] : counters_)
    if (value.second->success.load() + value.second->fail.load() > 0)
      out.push_back({key.first, key.second, value.first, value.second});
  return out;
}

}  // namespace kserve
}  // namespace tfpopef
