// One core's float32 FMA peak: 24 independent 16-lane vfmadd231ps per loop iteration (the register
// tile's 24 accumulators, without its loads), best of 7 runs; what the packed-GEMM tile's GFLOP/s
// is a share of (docs/benchmarks.md, "Packed GEMM"). x86-64 with AVX-512:
//
//   g++ -O2 benchmarks/cc/fma_peak.cc -o fma_peak && ./fma_peak
#include <chrono>
#include <cstdio>

int main() {
  const long iters = 20000000;
  double best = 1e30;
  for (int r = 0; r < 7; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    long n = iters;
    asm volatile(
        "1:\n"
        ".irp i,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27\n"
        "vfmadd231ps %%zmm1, %%zmm2, %%zmm\\i\n"
        ".endr\n"
        "dec %0\n"
        "jnz 1b\n"
        : "+r"(n)
        :
        : "memory");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s < best) best = s;
  }
  printf("%.1f GFLOP/s per core\n", 24.0 * 32 * iters / best / 1e9);
}
