// Path selection and the portable path of vector_math.h.
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "tf_popef_op/runtime/cc/base/error.h"
#include "tf_popef_op/runtime/cc/kernels/support/activations.h"
#include "tf_popef_op/runtime/cc/kernels/support/cpu_features.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math_paths.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TFPOPEF_HAVE_AVX2_PATH 1
#endif

namespace tfpopef {
namespace kernels {
namespace vmath {
namespace {

// ------------------------------------------------------------------ portable path
// The scalar definitions of activations.h in plain loops.

template <typename F>
void Map(const float* x, float* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

void PortableExp(const float* x, float* y, int64_t n) { Map(x, y, n, [](float v) { return std::exp(v); }); }
void PortableLog(const float* x, float* y, int64_t n) { Map(x, y, n, [](float v) { return std::log(v); }); }
void PortableTanh(const float* x, float* y, int64_t n) { Map(x, y, n, activation::Tanh); }
void PortableErf(const float* x, float* y, int64_t n) { Map(x, y, n, [](float v) { return std::erf(v); }); }
void PortableSigmoid(const float* x, float* y, int64_t n) { Map(x, y, n, activation::Sigmoid); }
void PortableSwish(const float* x, float* y, int64_t n) {
  Map(x, y, n, [](float v) { return activation::Swish(v, 1.0f); });
}
void PortableGelu(const float* x, float* y, int64_t n) { Map(x, y, n, activation::Gelu); }
void PortableGeluTanh(const float* x, float* y, int64_t n) { Map(x, y, n, activation::GeluTanh); }
void PortableElu(const float* x, float* y, int64_t n, float alpha, float scale) {
  Map(x, y, n, [alpha, scale](float v) { return activation::Elu(v, alpha, scale); });
}
float PortableMax(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}
float PortableExpShiftedSum(const float* x, float* y, int64_t n, float shift) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - shift);
    sum += y[i];
  }
  return sum;
}

// ------------------------------------------------------------------ selection

#ifdef TFPOPEF_HAVE_AVX2_PATH
bool DetectAvx2Fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && CpuidHasF16c();
}
bool DetectAvx512() {
  __builtin_cpu_init();
  return DetectAvx2Fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
}
#else
bool DetectAvx2Fma() { return false; }
bool DetectAvx512() { return false; }
#endif

bool CpuHas(SimdPath path) {
  return path == SimdPath::kPortable || (path == SimdPath::kAvx2 ? CpuHasAvx2Fma() : CpuHasAvx512());
}

const PathTable* TableFor(SimdPath path) {
#ifdef TFPOPEF_HAVE_AVX2_PATH
  if (path == SimdPath::kAvx512) {
    static const PathTable avx512 = [] {
      PathTable table = kAvx2Table;
      table.exp = Avx512Exp;
      table.gelu = Avx512Gelu;
      table.sigmoid = Avx512Sigmoid;
      table.swish = Avx512Swish;
      table.exp_shifted_sum = Avx512ExpShiftedSum;
      return table;
    }();
    return &avx512;
  }
  if (path == SimdPath::kAvx2) return &kAvx2Table;
#endif
  (void)path;
  return &kPortableTable;
}

// nullptr until the first use reads TF_POPEF_SIMD (a bad value throws on every use).
std::atomic<const PathTable*>& ActiveTable() {
  static std::atomic<const PathTable*> table{nullptr};
  return table;
}

std::atomic<SimdPath>& ActivePathSlot() {
  static std::atomic<SimdPath> path{SimdPath::kPortable};
  return path;
}

const PathTable& Table() {
  const PathTable* table = ActiveTable().load(std::memory_order_acquire);
  if (table != nullptr) return *table;
  static const SimdPath from_env = SimdPathFromSetting(std::getenv("TF_POPEF_SIMD"));  // thread-safe; retried if it throws
  const PathTable* expected = nullptr;
  if (ActiveTable().compare_exchange_strong(expected, TableFor(from_env), std::memory_order_acq_rel))
    ActivePathSlot().store(from_env, std::memory_order_release);
  return *ActiveTable().load(std::memory_order_acquire);
}

}  // namespace

const PathTable kPortableTable = {PortableExp,     PortableLog,  PortableTanh,    PortableErf,
                                  PortableSigmoid, PortableSwish, PortableGelu,   PortableGeluTanh,
                                  PortableElu,     PortableMax,  PortableExpShiftedSum};

bool CpuHasAvx2Fma() {
  static const bool has = DetectAvx2Fma();
  return has;
}

bool CpuHasAvx512() {
  static const bool has = DetectAvx512();
  return has;
}

SimdPath SimdPathFromSetting(const char* text) {
  const std::string value = text ? text : "";
  if (value.empty() || value == "auto")
    return CpuHasAvx512() ? SimdPath::kAvx512 : CpuHasAvx2Fma() ? SimdPath::kAvx2 : SimdPath::kPortable;
  for (SimdPath path : {SimdPath::kPortable, SimdPath::kAvx2, SimdPath::kAvx512}) {
    if (value != SimdPathName(path)) continue;
    if (!CpuHas(path))
      throw Error(ErrorCode::kUnimplemented, "TF_POPEF_SIMD=" + value + ", but this CPU lacks " +
                                                 (path == SimdPath::kAvx2 ? "AVX2/FMA" : "AVX-512F/VL") +
                                                 " (use 'auto' or 'portable')");
    return path;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "TF_POPEF_SIMD=\"" + value + "\": expected 'auto', 'avx512', 'avx2' or 'portable'");
}

SimdPath ActivePath() {
  Table();
  return ActivePathSlot().load(std::memory_order_acquire);
}

const char* SimdPathName(SimdPath path) {
  return path == SimdPath::kAvx512 ? "avx512" : path == SimdPath::kAvx2 ? "avx2" : "portable";
}

SimdPath SetPathForTesting(SimdPath path) {
  if (!CpuHas(path))
    throw Error(ErrorCode::kUnimplemented, std::string("the ") + SimdPathName(path) + " path needs a CPU that has it");
  const SimdPath previous = ActivePath();
  ActiveTable().store(TableFor(path), std::memory_order_release);
  ActivePathSlot().store(path, std::memory_order_release);
  return previous;
}

void Exp(const float* x, float* y, int64_t n) { Table().exp(x, y, n); }
void Log(const float* x, float* y, int64_t n) { Table().log(x, y, n); }
void Tanh(const float* x, float* y, int64_t n) { Table().tanh(x, y, n); }
void Erf(const float* x, float* y, int64_t n) { Table().erf(x, y, n); }
void Sigmoid(const float* x, float* y, int64_t n) { Table().sigmoid(x, y, n); }
void Swish(const float* x, float* y, int64_t n) { Table().swish(x, y, n); }
void Gelu(const float* x, float* y, int64_t n) { Table().gelu(x, y, n); }
void GeluTanh(const float* x, float* y, int64_t n) { Table().gelu_tanh(x, y, n); }
void Elu(const float* x, float* y, int64_t n, float alpha, float scale) { Table().elu(x, y, n, alpha, scale); }
float Max(const float* x, int64_t n) { return Table().max(x, n); }
float ExpShiftedSum(const float* x, float* y, int64_t n, float shift) {
  return Table().exp_shifted_sum(x, y, n, shift);
}

}  // namespace vmath
}  // namespace kernels
}  // namespace tfpopef
