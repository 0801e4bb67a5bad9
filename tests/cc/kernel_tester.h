// OpTester-style harness for the emulator kernels (after onnxruntime's OpTester):
//
//   KernelTester("Add").AddInput(DType::kFloat32, {2, 3}, {...})
//                      .AddInput(DType::kFloat32, {3}, {...})
//                      .AddOutput(DType::kFloat32, {2, 3}, {...})
//                      .Run();
//
// Run() prepares the kernel through KernelRegistry::Get().Create exactly as the runtime does
// (a KernelSpec with a JSON attrs object), allocates 64-byte aligned inputs, outputs and
// scratch surrounded by guard bytes, runs the kernel and checks that every output matches,
// that no guard byte and no input was touched. ExpectError() checks that preparing fails
// with a given error code and message fragment. Failures are recorded, not thrown, so one
// run of the test binary reports every broken case.
//
// Values are given as doubles and encoded into the tensor's dtype (float16: rounded to
// nearest even, so expected float16 values are "rounded to fp16"; bool: x != 0), or with a
// typed overload (AddInput<int64_t>(...)) when exact integer bit patterns matter.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tf_popef_op/runtime/cc/base/dtype.h"
#include "tf_popef_op/runtime/cc/base/error.h"
#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/kernel.h"

namespace tfpopef {
namespace test {

// Short names the kernel test files share.
inline constexpr DType F32 = DType::kFloat32;
inline constexpr DType F16 = DType::kFloat16;
inline constexpr DType F64 = DType::kFloat64;
inline constexpr DType I32 = DType::kInt32;
inline constexpr DType I64 = DType::kInt64;
inline constexpr DType U8 = DType::kUInt8;
inline constexpr DType BOOL = DType::kBool;
inline constexpr ErrorCode kInvalid = ErrorCode::kInvalidArgument;
inline constexpr ErrorCode kUnimpl = ErrorCode::kUnimplemented;
inline const double kNaN = std::numeric_limits<double>::quiet_NaN();
inline const double kInf = std::numeric_limits<double>::infinity();


// ---------------------------------------------------------------- minimal test framework

struct TestCase {
  std::string name;
  std::function<void()> body;
};

inline std::vector<TestCase>& AllTests() {
  static std::vector<TestCase> tests;
  return tests;
}

struct TestRegistrar {
  TestRegistrar(const char* name, std::function<void()> body) { AllTests().push_back({name, std::move(body)}); }
};

// Failures of the case currently running (appended from the main thread only).
inline std::vector<std::string>& CurrentFailures() {
  static std::vector<std::string> failures;
  return failures;
}

inline bool& Verbose() {
  static bool verbose = false;
  return verbose;
}

inline void Fail(const std::string& message) { CurrentFailures().push_back(message); }

#define KERNEL_TEST(name)                                                    \
  static void name();                                                        \
  static ::tfpopef::test::TestRegistrar name##_registrar(#name, &name);      \
  static void name()

#define EXPECT_TRUE(cond)                                                                      \
  do {                                                                                         \
    if (!(cond)) ::tfpopef::test::Fail(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                                       ": expected " #cond);                                   \
  } while (0)

// Runs every registered case whose name contains the filter argument (if given); "-v" prints
// the error messages of error cases too; "--shard=I/N" runs every N-th matching case from the
// I-th on, so N processes can share the cases. Returns the process exit code.
inline int RunAllTests(int argc, char** argv) {
  std::string filter;
  int shard = 0, shards = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-v") {
      Verbose() = true;
    } else if (arg.rfind("--shard=", 0) == 0) {
      if (std::sscanf(arg.c_str(), "--shard=%d/%d", &shard, &shards) != 2 || shards < 1 || shard < 0 ||
          shard >= shards) {
        std::printf("bad %s: expected --shard=I/N with 0 <= I < N\n", arg.c_str());
        return 2;
      }
    } else {
      filter = arg;
    }
  }
  int run = 0, failed = 0;
  int matched = 0;
  for (const TestCase& t : AllTests()) {
    if (!filter.empty() && t.name.find(filter) == std::string::npos) continue;
    if (matched++ % shards != shard) continue;
    CurrentFailures().clear();
    try {
      t.body();
    } catch (const std::exception& e) {
      Fail(std::string("uncaught exception: ") + e.what());
    }
    ++run;
    if (CurrentFailures().empty()) {
      std::printf("[  OK  ] %s\n", t.name.c_str());
    } else {
      ++failed;
      std::printf("[ FAIL ] %s\n", t.name.c_str());
      for (const std::string& f : CurrentFailures()) std::printf("         %s\n", f.c_str());
    }
  }
  std::printf("%d cases, %d passed, %d failed\n", run, run - failed, failed);
  std::fflush(stdout);
  return failed == 0 && run > 0 ? 0 : 1;
}

// ---------------------------------------------------------------- dtype helpers

template <typename T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return DType::kFloat64;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::kInt8;
  else if constexpr (std::is_same_v<T, int16_t>) return DType::kInt16;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::kUInt8;
  else if constexpr (std::is_same_v<T, uint16_t>) return DType::kUInt16;
  else if constexpr (std::is_same_v<T, uint32_t>) return DType::kUInt32;
  else if constexpr (std::is_same_v<T, uint64_t>) return DType::kUInt64;
  else {
    static_assert(std::is_same_v<T, bool>, "no dtype for this C++ type");
    return DType::kBool;
  }
}

inline bool IsFloating(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kFloat64; }

inline const std::vector<DType>& AllDTypes() {
  static const std::vector<DType> all = {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt8,
                                         DType::kInt16,   DType::kInt32,   DType::kInt64,   DType::kUInt8,
                                         DType::kUInt16,  DType::kUInt32,  DType::kUInt64,  DType::kBool};
  return all;
}

// Writes `v` into one element of dtype `t` (test values are in range for the dtype).
inline void EncodeDouble(double v, DType t, uint8_t* dst) {
  auto put = [&](auto x) { std::memcpy(dst, &x, sizeof(x)); };
  switch (t) {
    case DType::kFloat32: put(static_cast<float>(v)); break;
    case DType::kFloat16: put(FloatToHalf(static_cast<float>(v))); break;
    case DType::kFloat64: put(v); break;
    case DType::kInt8: put(static_cast<int8_t>(v)); break;
    case DType::kInt16: put(static_cast<int16_t>(v)); break;
    case DType::kInt32: put(static_cast<int32_t>(v)); break;
    case DType::kInt64: put(static_cast<int64_t>(v)); break;
    case DType::kUInt8: put(static_cast<uint8_t>(v)); break;
    case DType::kUInt16: put(static_cast<uint16_t>(v)); break;
    case DType::kUInt32: put(static_cast<uint32_t>(v)); break;
    case DType::kUInt64: put(static_cast<uint64_t>(v)); break;
    case DType::kBool: put(static_cast<uint8_t>(v != 0)); break;
  }
}

// Floating dtypes decoded to double (for tolerance comparisons).
inline double DecodeFloating(const uint8_t* p, DType t) {
  if (t == DType::kFloat32) { float f; std::memcpy(&f, p, 4); return f; }
  if (t == DType::kFloat64) { double d; std::memcpy(&d, p, 8); return d; }
  uint16_t h; std::memcpy(&h, p, 2); return HalfToFloat(h);
}

inline std::string ElementToString(const uint8_t* p, DType t) {
  std::ostringstream s;
  auto get = [&](auto x) { std::memcpy(&x, p, sizeof(x)); return x; };
  switch (t) {
    case DType::kFloat32: case DType::kFloat16: case DType::kFloat64: {
      s.precision(9);
      s << DecodeFloating(p, t);
      if (t == DType::kFloat16) s << " (0x" << std::hex << get(uint16_t()) << ")";
      break;
    }
    case DType::kInt8: s << int(get(int8_t())); break;
    case DType::kInt16: s << get(int16_t()); break;
    case DType::kInt32: s << get(int32_t()); break;
    case DType::kInt64: s << get(int64_t()); break;
    case DType::kUInt8: s << unsigned(get(uint8_t())); break;
    case DType::kUInt16: s << get(uint16_t()); break;
    case DType::kUInt32: s << get(uint32_t()); break;
    case DType::kUInt64: s << get(uint64_t()); break;
    case DType::kBool: s << unsigned(get(uint8_t())); break;
  }
  return s.str();
}

inline std::string IndexToString(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return ShapeToString(idx);
}

// ---------------------------------------------------------------- guarded buffers

// 64-byte aligned memory with guard zones on both sides, to catch out-of-bounds writes.
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 4096;  // generous: small overruns are reported, not heap corruption
  static constexpr uint8_t kGuardByte = 0xA5;

  GuardedBuffer(size_t bytes, uint8_t fill) : bytes_(bytes), storage_(bytes + 2 * kGuard + 64, kGuardByte) {
    const auto base = reinterpret_cast<uintptr_t>(storage_.data()) + kGuard;
    offset_ = (base + 63) / 64 * 64 - reinterpret_cast<uintptr_t>(storage_.data());
    std::memset(data(), fill, bytes_);
  }
  uint8_t* data() { return storage_.data() + offset_; }
  const uint8_t* data() const { return storage_.data() + offset_; }
  size_t size() const { return bytes_; }
  bool GuardsIntact() const {
    for (size_t i = 0; i < offset_; ++i)
      if (storage_[i] != kGuardByte) return false;
    for (size_t i = offset_ + bytes_; i < storage_.size(); ++i)
      if (storage_[i] != kGuardByte) return false;
    return true;
  }

 private:
  size_t bytes_;
  std::vector<uint8_t> storage_;
  size_t offset_ = 0;
};

// ---------------------------------------------------------------- the tester

class KernelTester {
 public:
  explicit KernelTester(std::string op, std::string node = "test_node")
      : op_(std::move(op)), node_(std::move(node)), attrs_(nlohmann::json::object()) {}

  KernelTester& Attr(const std::string& name, nlohmann::json value) {
    attrs_[name] = std::move(value);
    return *this;
  }
  // Replaces the whole attrs object (may be any JSON, to test malformed attrs).
  KernelTester& Attrs(nlohmann::json attrs) {
    attrs_ = std::move(attrs);
    return *this;
  }

  KernelTester& AddInput(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
    inputs_.push_back(Encode(dtype, std::move(shape), values, "input"));
    return *this;
  }
  template <typename T>
  KernelTester& AddInput(std::vector<int64_t> shape, const std::vector<T>& values) {
    inputs_.push_back(EncodeTyped(std::move(shape), values, "input"));
    return *this;
  }
  KernelTester& AddOutput(DType dtype, std::vector<int64_t> shape, const std::vector<double>& expected) {
    outputs_.push_back(Encode(dtype, std::move(shape), expected, "output"));
    return *this;
  }
  template <typename T>
  KernelTester& AddOutput(std::vector<int64_t> shape, const std::vector<T>& expected) {
    outputs_.push_back(EncodeTyped(std::move(shape), expected, "output"));
    return *this;
  }

  // Floating outputs match when |got - expected| <= atol + rtol * |expected| (NaN matches
  // NaN, inf matches the same inf). Default: exact. Integer and bool outputs are always exact.
  KernelTester& Tolerance(double atol, double rtol) {
    atol_ = atol;
    rtol_ = rtol;
    return *this;
  }
  // Input i is announced as a weight (KernelSpec::constant_inputs), as the runtime does for
  // tensors in weight memory.
  KernelTester& ConstantInput(size_t i) {
    if (constant_inputs_.size() <= i) constant_inputs_.resize(i + 1, false);
    constant_inputs_[i] = true;
    return *this;
  }
  // Output 0 is bound to input 0's buffer, as the compiler does for in-place view ops.
  KernelTester& InPlace() {
    in_place_ = 0;
    return *this;
  }
  // Output 0 is bound to input i's buffer and the spec says so (KernelSpec::in_place_input), as
  // the runtime does for a step with "in_place_input" (NchwcConv's in-place residual Sum).
  KernelTester& InPlaceInput(size_t i) {
    in_place_ = static_cast<int>(i);
    in_place_input_ = static_cast<int>(i);
    return *this;
  }
  // Runs the same prepared kernel from `threads` threads at once, `repeats` times each, every
  // thread with its own buffers: Kernel::Run must be const and thread-safe.
  KernelTester& Concurrently(int threads, int repeats) {
    threads_ = threads;
    repeats_ = repeats;
    return *this;
  }

  // "Add(float32[2, 3], float32[3]) -> float32[2, 3] attrs {}": context for failures.
  std::string Describe() const {
    auto list = [](const std::vector<Tensor>& ts) {
      std::string s;
      for (const Tensor& t : ts) s += (s.empty() ? "" : ", ") + std::string(DTypeName(t.desc.dtype)) + ShapeToString(t.desc.shape);
      return s;
    };
    return op_ + "(" + list(inputs_) + ") -> " + list(outputs_) + " attrs " + attrs_.dump();
  }

  void Run() {
    if (!setup_error_.empty()) return Fail(Describe() + ": test setup: " + setup_error_);
    if (in_place_ >= 0 && (threads_ > 1 || repeats_ > 1 || static_cast<size_t>(in_place_) >= inputs_.size() ||
                           outputs_.empty() || inputs_[in_place_].bytes.size() != outputs_[0].bytes.size()))
      return Fail(Describe() + ": test setup: InPlace needs one run and equal input / output 0 sizes");
    std::unique_ptr<Kernel> kernel;
    try {
      KernelSpec spec = Spec();
      kernel = KernelRegistry::Get().Create(spec);
    } catch (const std::exception& e) {
      return Fail(Describe() + ": prepare failed: " + e.what());
    }
    std::vector<std::vector<std::string>> failures(threads_);
    std::vector<std::thread> pool;
    for (int t = 1; t < threads_; ++t) pool.emplace_back([&, t] { RunOnce(*kernel, &failures[t]); });
    RunOnce(*kernel, &failures[0]);
    for (std::thread& th : pool) th.join();
    for (int t = 0; t < threads_; ++t)
      for (const std::string& f : failures[t])
        Fail(Describe() + (threads_ > 1 ? " [thread " + std::to_string(t) + "]" : "") + ": " + f);
  }

  // Prepares and runs the kernel once and returns output `o`'s values, compared with nothing:
  // for a test whose oracle is another kernel run. Outputs are added with any expected values.
  std::vector<double> RunAndGetOutput(size_t o) const {
    const std::unique_ptr<Kernel> kernel = KernelRegistry::Get().Create(Spec());
    std::vector<std::vector<uint8_t>> inputs, outputs;
    for (const Tensor& t : inputs_) inputs.push_back(t.bytes);
    for (const Tensor& t : outputs_) outputs.emplace_back(t.bytes.size());
    std::vector<uint8_t> scratch(kernel->scratch_bytes() + 64);
    std::vector<const void*> in_ptrs;
    std::vector<void*> out_ptrs;
    for (const auto& b : inputs) in_ptrs.push_back(b.data());
    for (auto& b : outputs) out_ptrs.push_back(b.data());
    if (in_place_ >= 0) out_ptrs[0] = inputs[in_place_].data();
    void* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
    kernel->Run(KernelContext{in_ptrs.data(), out_ptrs.data(), aligned});
    const DType dtype = outputs_.at(o).desc.dtype;
    std::vector<double> values(static_cast<size_t>(outputs_[o].desc.numel()));
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = DecodeFloating(outputs[o].data() + i * DTypeSize(dtype), dtype);
    return values;
  }

  // Preparing must fail with `code` and a message containing `fragment`.
  void ExpectError(ErrorCode code, const std::string& fragment) {
    if (!setup_error_.empty()) return Fail(Describe() + ": test setup: " + setup_error_);
    try {
      KernelSpec spec = Spec();
      KernelRegistry::Get().Create(spec);
    } catch (const Error& e) {
      if (Verbose()) std::printf("         %s: %s\n", ErrorCodeName(e.code()), e.what());
      if (e.code() != code)
        Fail(Describe() + ": expected error code " + ErrorCodeName(code) + ", got " + ErrorCodeName(e.code()) +
             ": " + e.what());
      if (std::string(e.what()).find(fragment) == std::string::npos)
        Fail(Describe() + ": error message lacks '" + fragment + "': " + e.what());
      if (std::string(e.what()).find("op '" + op_ + "' (node '" + node_ + "')") == std::string::npos)
        Fail(Describe() + ": error message does not name the op and node: " + e.what());
      return;
    } catch (const std::exception& e) {
      return Fail(Describe() + ": expected tfpopef::Error, got another exception: " + e.what());
    }
    Fail(Describe() + ": expected preparing to fail with " + ErrorCodeName(code) + " ('" + fragment +
         "') but it succeeded");
  }

  // The spec the kernel is prepared from (for a kernel's own query of what it chose).
  KernelSpec Spec() const {
    KernelSpec spec{op_, node_, {}, {}, tfpopef::Attrs(attrs_, "op '" + op_ + "' (node '" + node_ + "')")};
    for (const Tensor& t : inputs_) spec.inputs.push_back(t.desc);
    for (const Tensor& t : outputs_) spec.outputs.push_back(t.desc);
    spec.constant_inputs = constant_inputs_;
    spec.in_place_input = in_place_input_;
    return spec;
  }

 private:
  struct Tensor {
    TensorDesc desc;
    std::vector<uint8_t> bytes;
  };

  Tensor Encode(DType dtype, std::vector<int64_t> shape, const std::vector<double>& values, const char* what) {
    Tensor t{TensorDesc{dtype, std::move(shape)}, {}};
    CheckCount(t.desc, values.size(), what);
    t.bytes.resize(ByteSize(t.desc));
    for (size_t i = 0; i < values.size() && i * DTypeSize(dtype) < t.bytes.size(); ++i)
      EncodeDouble(values[i], dtype, t.bytes.data() + i * DTypeSize(dtype));
    return t;
  }

  template <typename T>
  Tensor EncodeTyped(std::vector<int64_t> shape, const std::vector<T>& values, const char* what) {
    constexpr DType dtype = DTypeOf<T>();
    Tensor t{TensorDesc{dtype, std::move(shape)}, {}};
    CheckCount(t.desc, values.size(), what);
    t.bytes.resize(ByteSize(t.desc));
    for (size_t i = 0; i < values.size() && i * sizeof(T) < t.bytes.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>) t.bytes[i] = values[i] ? 1 : 0;
      else std::memcpy(t.bytes.data() + i * sizeof(T), &values[i], sizeof(T));
    }
    return t;
  }

  // A shape with a negative dim (to test that kernels reject it) holds no values.
  static size_t ByteSize(const TensorDesc& d) { return d.numel() < 0 ? 0 : d.nbytes(); }

  void CheckCount(const TensorDesc& d, size_t count, const char* what) {
    if (static_cast<int64_t>(count) != std::max<int64_t>(d.numel(), 0))
      setup_error_ = std::string(what) + " " + ShapeToString(d.shape) + " needs " + std::to_string(d.numel()) +
                     " values, got " + std::to_string(count);
  }

  bool Matches(const uint8_t* got, const uint8_t* expected, DType t) const {
    if (!IsFloating(t)) return std::memcmp(got, expected, DTypeSize(t)) == 0;
    const double g = DecodeFloating(got, t), e = DecodeFloating(expected, t);
    if (std::isnan(e) || std::isnan(g)) return std::isnan(e) && std::isnan(g);
    if (std::isinf(e) || std::isinf(g)) return g == e;
    return std::fabs(g - e) <= atol_ + rtol_ * std::fabs(e);
  }

  void RunOnce(const Kernel& kernel, std::vector<std::string>* failures) const {
    std::vector<GuardedBuffer> inputs, outputs;
    for (const Tensor& t : inputs_) {
      inputs.emplace_back(t.bytes.size(), 0);
      if (!t.bytes.empty()) std::memcpy(inputs.back().data(), t.bytes.data(), t.bytes.size());
    }
    for (const Tensor& t : outputs_) outputs.emplace_back(t.bytes.size(), 0xCD);  // garbage until written
    GuardedBuffer scratch(kernel.scratch_bytes(), 0xEE);
    std::vector<const void*> in_ptrs;
    std::vector<void*> out_ptrs;
    for (GuardedBuffer& b : inputs) in_ptrs.push_back(b.data());
    for (GuardedBuffer& b : outputs) out_ptrs.push_back(b.data());
    if (in_place_ >= 0) out_ptrs[0] = inputs[in_place_].data();
    const KernelContext ctx{in_ptrs.data(), out_ptrs.data(), scratch.data()};
    for (int r = 0; r < repeats_; ++r) {
      try {
        kernel.Run(ctx);
      } catch (const std::exception& e) {
        failures->push_back(std::string("Run threw: ") + e.what());
        return;
      }
    }
    for (size_t o = 0; o < outputs_.size(); ++o) {
      const Tensor& want = outputs_[o];
      const uint8_t* got = static_cast<const uint8_t*>(out_ptrs[o]);
      const size_t es = DTypeSize(want.desc.dtype);
      int reported = 0, mismatches = 0;
      for (int64_t i = 0; i < want.desc.numel(); ++i) {
        if (Matches(got + i * es, want.bytes.data() + i * es, want.desc.dtype)) continue;
        ++mismatches;
        if (reported++ < 6)
          failures->push_back("output " + std::to_string(o) + " at " + IndexToString(i, want.desc.shape) + ": got " +
                              ElementToString(got + i * es, want.desc.dtype) + ", expected " +
                              ElementToString(want.bytes.data() + i * es, want.desc.dtype));
      }
      if (mismatches > 6)
        failures->push_back("output " + std::to_string(o) + ": " + std::to_string(mismatches) +
                            " mismatching elements in total");
      if (!outputs[o].GuardsIntact()) failures->push_back("output " + std::to_string(o) + ": wrote out of bounds");
    }
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (!inputs[i].GuardsIntact()) failures->push_back("input " + std::to_string(i) + ": guard bytes changed");
      if (static_cast<int>(i) != in_place_ && !inputs_[i].bytes.empty() &&
          std::memcmp(inputs[i].data(), inputs_[i].bytes.data(), inputs_[i].bytes.size()) != 0)
        failures->push_back("input " + std::to_string(i) + " was modified");
    }
    if (!scratch.GuardsIntact())
      failures->push_back("scratch: wrote beyond the declared scratch_bytes() = " +
                          std::to_string(kernel.scratch_bytes()));
  }

  std::string op_, node_;
  nlohmann::json attrs_;
  std::vector<Tensor> inputs_, outputs_;
  double atol_ = 0, rtol_ = 0;
  int in_place_ = -1;        // the input whose buffer output 0 is bound to
  int in_place_input_ = -1;  // KernelSpec::in_place_input
  std::vector<bool> constant_inputs_;
  int threads_ = 1, repeats_ = 1;
  std::string setup_error_;
};

}  // namespace test
}  // namespace tfpopef
