#include "tf_popef_op/runtime/cc/core/executable.h"

#include <cstdio>

#include "tf_popef_op/runtime/cc/base/aligned_buffer.h"

#include "tf_popef_op/runtime/cc/core/executable_parser.h"

namespace tfpopef {

const char* StorageName(Storage storage) {
  switch (storage) {
    case Storage::kInput: return "input";
    case Storage::kOutput: return "output";
    case Storage::kWeight: return "weight";
    case Storage::kArena: return "arena";
  }
  return "?";
}

std::shared_ptr<const Executable> Executable::Create(std::shared_ptr<const PopefReader> popef) {
  if (!popef) throw Error(ErrorCode::kInvalidArgument, "Executable::Create: no PopEF");
  std::shared_ptr<Executable> exe(new Executable(std::move(popef)));
  Parser(*exe).Run();
  return exe;
}

std::string Executable::hash_hex() const {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(hash_));
  return buf;
}

uint64_t Executable::device_bytes() const { return AlignUp(weights_bytes_) + arena_bytes_; }

int Executable::FindAnchor(const std::string& name_or_alias) const {
  auto it = anchor_by_name_.find(name_or_alias);
  return it == anchor_by_name_.end() ? -1 : it->second;
}

}  // namespace tfpopef
