// Typed, checked access to the fields of a JSON object (PopEF Metadata / Executable), with
// the field's path in every message: "model.popef: Executable.tensors[3].offset: expected a
// non-negative integer, got \"abc\"". All failures are Error(kInvalidArgument).
//
// Ownership: a JsonObject is a view; the nlohmann::json it points to must outlive it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tf_popef_op/runtime/cc/base/error.h"

namespace tfpopef {

class JsonObject {
 public:
  // `path` is the object's location, e.g. "model.popef: Executable.tensors[3]".
  JsonObject(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) throw Error(ErrorCode::kInvalidArgument, path_ + ": expected a JSON object, got " + Dump(j_));
  }

  const std::string& path() const { return path_; }
  std::string Path(const std::string& key) const { return path_ + "." + key; }
  bool Has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  [[noreturn]] void Fail(const std::string& key, const std::string& what) const {
    throw Error(ErrorCode::kInvalidArgument, Path(key) + ": " + what);
  }

  // Refuses a field outside `known`: a newer writer's additive field may change what the
  // object means, so it is never silently ignored. `what` names the object ("an If step").
  void OnlyKnownKeys(std::initializer_list<const char*> known, const std::string& what) const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool ok = false;
      for (const char* k : known) ok = ok || it.key() == k;
      if (ok) continue;
      std::string list;
      for (const char* k : known) list += std::string(list.empty() ? "" : ", ") + k;
      Fail(it.key(), "unknown field of " + what + " (its fields: " + list +
                         "); load this PopEF with a runtime that matches the compiler that wrote it");
    }
  }

  const nlohmann::json& Required(const std::string& key) const {
    if (!j_.contains(key)) Fail(key, "missing required field");
    return j_.at(key);
  }

  std::string String(const std::string& key) const {
    const auto& v = Required(key);
    if (!v.is_string()) Fail(key, "expected a string, got " + Dump(v));
    return v.get<std::string>();
  }

  int64_t Int(const std::string& key, int64_t min = std::numeric_limits<int64_t>::min(),
              int64_t max = std::numeric_limits<int64_t>::max()) const {
    return CheckedInt(Required(key), Path(key), min, max);
  }
  int64_t IntOr(const std::string& key, int64_t def, int64_t min = std::numeric_limits<int64_t>::min(),
                int64_t max = std::numeric_limits<int64_t>::max()) const {
    return Has(key) ? Int(key, min, max) : def;
  }

  bool Bool(const std::string& key, bool def) const {
    if (!Has(key)) return def;
    const auto& v = j_.at(key);
    if (!v.is_boolean()) Fail(key, "expected true or false, got " + Dump(v));
    return v.get<bool>();
  }

  const nlohmann::json& Array(const std::string& key) const {
    const auto& v = Required(key);
    if (!v.is_array()) Fail(key, "expected a JSON array, got " + Dump(v));
    return v;
  }

  JsonObject Object(const std::string& key) const { return JsonObject(Required(key), Path(key)); }

  std::vector<std::string> Strings(const std::string& key) const {
    std::vector<std::string> out;
    const auto& a = Array(key);
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_string()) Fail(key, "element " + std::to_string(i) + " is not a string: " + Dump(a[i]));
      out.push_back(a[i].get<std::string>());
    }
    return out;
  }

  std::vector<int64_t> Ints(const std::string& key, int64_t min = std::numeric_limits<int64_t>::min(),
                            int64_t max = std::numeric_limits<int64_t>::max()) const {
    std::vector<int64_t> out;
    const auto& a = Array(key);
    for (size_t i = 0; i < a.size(); ++i)
      out.push_back(CheckedInt(a[i], Path(key) + "[" + std::to_string(i) + "]", min, max));
    return out;
  }

  // A static shape: non-negative dims whose product (times 8 bytes) cannot overflow.
  std::vector<int64_t> Shape(const std::string& key) const {
    std::vector<int64_t> dims = Ints(key, 0);
    int64_t numel = 1;
    for (int64_t d : dims) {
      if (d != 0 && numel > (int64_t{1} << 58) / d) Fail(key, "shape is too large");
      numel *= d;
    }
    return dims;
  }

  static int64_t CheckedInt(const nlohmann::json& v, const std::string& path, int64_t min, int64_t max) {
    int64_t x;
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw Error(ErrorCode::kInvalidArgument, path + ": integer " + Dump(v) + " is too large");
      x = static_cast<int64_t>(u);
    } else if (v.is_number_integer()) {
      x = v.get<int64_t>();
    } else {
      throw Error(ErrorCode::kInvalidArgument, path + ": expected an integer, got " + Dump(v));
    }
    if (x < min || x > max) {
      std::string range = min == 0 && max == std::numeric_limits<int64_t>::max()
                              ? "a non-negative integer"
                              : "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
      throw Error(ErrorCode::kInvalidArgument, path + ": expected " + range + ", got " + std::to_string(x));
    }
    return x;
  }

  // Short JSON text for messages (long values are cut).
  static std::string Dump(const nlohmann::json& v) {
    std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (s.size() > 80) s = s.substr(0, 77) + "...";
    return s;
  }

 private:
  const nlohmann::json& j_;
  std::string path_;
};

}  // namespace tfpopef
