// Times the arena plan check (core/arena_plan_check) against the whole Executable parse, per
// PopEF file given on the command line. Built and run by benchmarks/bench_arena_plan_check.py.
#include <chrono>
#include <cstdio>
#include <vector>

#include "tf_popef_op/runtime/cc/core/arena_plan_check.h"
#include "tf_popef_op/runtime/cc/core/executable.h"

namespace {

template <typename F>
double MicrosecondsPerCall(int calls, F&& f) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / calls;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tfpopef;
  for (int a = 1; a < argc; ++a) {
    auto reader = PopefReader::OpenFile(argv[a]);
    auto exe = Executable::Create(reader);
    std::vector<int> roots;
    for (const Subgraph& sg : exe->subgraphs()) roots.push_back(sg.program);
    size_t steps = 0;
    for (const Program& p : exe->programs()) steps += p.steps.size();
    const double check = MicrosecondsPerCall(
        1000, [&] { CheckArenaPlan(exe->source(), exe->tensors(), exe->programs(), roots); });
    const double parse = MicrosecondsPerCall(10, [&] { Executable::Create(reader); });
    std::printf("%s\t%zu\t%zu\t%.1f\t%.1f\n", argv[a], exe->tensors().size(), steps, check, parse);
  }
  return 0;
}
