// BLAS threading policy: single-threaded unless the user sets OPENBLAS_NUM_THREADS.
//
// The emulator gets its parallelism from concurrent sessions and requests, each running
// kernels on its own thread. OpenBLAS's own thread pool on top of that oversubscribes the
// cores, and its threads spin between calls: with many small GEMMs (one per batch entry) on a
// busy 2-core machine, a batched MatMul measured 0.7 GFLOP/s multi-threaded against 51
// GFLOP/s single-threaded. This only affects the scipy_openblas32 copy the runtime links;
// numpy's BLAS is a different library.
#include <cblas.h>

#include <cstdlib>

namespace tfpopef {
namespace kernels {
namespace {

struct SingleThreadedBlasByDefault {
  SingleThreadedBlasByDefault() {
    if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) scipy_openblas_set_num_threads(1);
  }
};

const SingleThreadedBlasByDefault kBlasThreads;

}  // namespace
}  // namespace kernels
}  // namespace tfpopef
