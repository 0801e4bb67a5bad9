#include "tf_popef_op/runtime/cc/core/arena_plan_check.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <set>
#include <utility>

#include "tf_popef_op/runtime/cc/core/control_flow.h"

namespace tfpopef {
namespace {

struct Range {
  int64_t start = 0, end = 0;  // time points, inclusive
};

// One program tree laid out on one timeline. A program is [a start point, its steps in order,
// an end point]; a kernel step is one point; a control step is a first point, its sub-programs
// one after the other (If branches side by side: tensors of one branch are never live with
// those of the other), and a last point. A tensor's live range is the hull of its uses, each
// widened to the whole step of the tensor's owner (the innermost program enclosing every use),
// so a tensor an inner step reads stays live across the whole If or loop.
class TreeCheck {
 public:
  TreeCheck(const std::string& source, const std::vector<ExecTensor>& tensors, const std::vector<Program>& programs)
      : source_(source), tensors_(tensors), programs_(programs), info_(programs.size()), live_(tensors.size()) {}

  void Run(int root) {
    Layout(root, -1, -1, 0);
    CollectUses();
    for (size_t t = 0; t < live_.size(); ++t)
      if (live_[t].used) ComputeLiveRange(static_cast<int>(t));
    GroupViews();
    Sweep();
  }

 private:
  struct ProgramInfo {
    bool in_tree = false;
    int parent = -1, parent_step = -1, depth = 0;
    Range span;
    std::vector<Range> steps;
  };
  enum class PointKind : uint8_t { kProgramStart, kStep, kStepEnd, kProgramEnd };
  struct Point {
    int program, step;
    PointKind kind;
  };
  struct Live {
    bool used = false;
    bool pinned = false;  // a loop body's formal input or result
    int writes = 0;
    int64_t first_read = INT64_MAX, first_write = INT64_MAX;  // start points of the first such use
    Range first, last;               // the use starting first, the one ending last
    int first_program = -1, last_program = -1;
    int first_in_preorder = -1, last_in_preorder = -1;  // use programs with the least/greatest start point
    int owner = -1;
    Range range;                     // the live range, widened to the owner's steps
  };
  // `part` is a view at byte `offset` of `whole`: a Reshape's output on its input (offset 0,
  // same size), or a Concat input on its slice of the output.
  struct View {
    int program, part, whole;
    uint64_t offset;
    bool concat;
  };

  // A kernel step whose output 0 takes the bytes of input in_place_input.
  struct InPlace {
    int program, step;
  };

  int64_t NewPoint(int program, int step, PointKind kind) {
    points_.push_back(Point{program, step, kind});
    return static_cast<int64_t>(points_.size()) - 1;
  }

  void Layout(int p, int parent, int parent_step, int depth) {
    info_[p].in_tree = true;
    info_[p].parent = parent;
    info_[p].parent_step = parent_step;
    info_[p].depth = depth;
    tree_.push_back(p);
    info_[p].span.start = NewPoint(p, -1, PointKind::kProgramStart);
    const std::vector<Step>& steps = programs_[p].steps;
    info_[p].steps.resize(steps.size());
    for (size_t j = 0; j < steps.size(); ++j) {
      const int step = static_cast<int>(j);
      Range r;
      r.start = NewPoint(p, step, PointKind::kStep);
      if (steps[j].control) {
        std::vector<int> subs = steps[j].control->sub_programs();
        if (subs.size() == 2 && subs[0] == subs[1]) subs.pop_back();  // then == else: one program
        for (int sub : subs) {
          if (info_[sub].in_tree)
            Fail("program '" + programs_[sub].name + "' is run by " + StepName(p, step) + " and also by " +
                 (info_[sub].parent >= 0 ? StepName(info_[sub].parent, info_[sub].parent_step)
                                         : "the subgraph it belongs to") +
                 "; a sub-program must belong to one If or Loop step");
          Layout(sub, p, step, depth + 1);
        }
        r.end = NewPoint(p, step, PointKind::kStepEnd);
      } else {
        r.end = r.start;
      }
      info_[p].steps[j] = r;
    }
    info_[p].span.end = NewPoint(p, -1, PointKind::kProgramEnd);
  }

  void Use(int t, int program, Range r) {
    if (tensors_[t].storage != Storage::kArena) return;
    Live& l = live_[t];
    const int64_t pre = info_[program].span.start;
    if (!l.used) {
      l.used = true;
      l.first = l.last = r;
      l.first_program = l.last_program = l.first_in_preorder = l.last_in_preorder = program;
      return;
    }
    if (r.start < l.first.start) l.first = r, l.first_program = program;
    if (r.end > l.last.end) l.last = r, l.last_program = program;
    if (pre < info_[l.first_in_preorder].span.start) l.first_in_preorder = program;
    if (pre > info_[l.last_in_preorder].span.start) l.last_in_preorder = program;
  }

  void CollectUses() {
    for (int p : tree_) {
      const std::vector<Step>& steps = programs_[p].steps;
      for (size_t j = 0; j < steps.size(); ++j) {
        const Step& s = steps[j];
        const Range r = info_[p].steps[j];
        if (s.control) {
          const ControlOperands ops = SplitControlOperands(s);
          for (int t : ops.enclosing) Use(t, p, r);
          // A loop body's formals and results: live through the whole body.
          const int body = s.control->body_program;
          for (int t : ops.body) {
            Use(t, body, info_[body].span);
            live_[t].pinned = true;
          }
        } else if (s.kind == Step::Kind::kKernel) {
          for (int t : s.inputs) Use(t, p, r);
          for (int t : s.outputs) Use(t, p, r);
          if (s.op == "Reshape" && s.inputs.size() == 1 && s.outputs.size() == 1)
            views_.push_back(View{p, s.outputs[0], s.inputs[0], 0, false});
          if (s.op == "Concat" && s.outputs.size() == 1) AddConcatViews(p, s);
          if (s.in_place_input >= 0) in_place_.push_back(InPlace{p, static_cast<int>(j)});
        }
        for (int t : s.inputs) live_[t].first_read = std::min(live_[t].first_read, r.start);
        for (int t : s.outputs) {
          ++live_[t].writes;
          live_[t].first_write = std::min(live_[t].first_write, r.start);
        }
      }
    }
  }

  // A Concat whose inputs are each one byte range of its output (every output dim before the
  // axis is 1): input i may be a view at the bytes of the inputs before it. The axis is the
  // first dim where an input differs from the output; if none does, the one input (or every
  // input, of an empty output) is the whole output.
  void AddConcatViews(int p, const Step& s) {
    const std::vector<int64_t>& out = tensors_[s.outputs[0]].desc.shape;
    size_t axis = out.size();
    for (int t : s.inputs) {
      const std::vector<int64_t>& in = tensors_[t].desc.shape;
      if (in.size() != out.size()) return;  // the kernel refuses it
      for (size_t d = 0; d < axis; ++d)
        if (in[d] != out[d]) axis = d;
    }
    if (axis < out.size())
      for (size_t d = 0; d < axis; ++d)
        if (out[d] != 1) return;
    uint64_t offset = 0;
    for (int t : s.inputs) {
      views_.push_back(View{p, t, s.outputs[0], offset, true});
      offset += tensors_[t].desc.nbytes();
    }
  }

  int CommonAncestor(int a, int b) const {
    while (info_[a].depth > info_[b].depth) a = info_[a].parent;
    while (info_[b].depth > info_[a].depth) b = info_[b].parent;
    while (a != b) a = info_[a].parent, b = info_[b].parent;
    return a;
  }

  // `r` (a use in `program`) widened to the step of `owner` that holds it.
  Range Widen(Range r, int program, int owner) const {
    if (program == owner) return r;
    while (info_[program].parent != owner) program = info_[program].parent;
    return info_[owner].steps[info_[program].parent_step];
  }

  void ComputeLiveRange(int t) {
    Live& l = live_[t];
    // The common ancestor of a set of tree nodes is that of the first and last in preorder.
    l.owner = CommonAncestor(l.first_in_preorder, l.last_in_preorder);
    l.range = Range{Widen(l.first, l.first_program, l.owner).start, Widen(l.last, l.last_program, l.owner).end};
    // Read before any step writes it: an input of its owner, live from the owner's start; if a
    // later step writes it, also to the owner's end (a loop body carries the value around).
    if (l.first_read < l.first_write) {
      l.range.start = info_[l.owner].span.start;
      if (l.first_write != INT64_MAX) l.range.end = info_[l.owner].span.end;
    }
  }

  int Find(int t) {
    while (group_[t] != t) t = group_[t] = group_[group_[t]];
    return t;
  }

  // A view sitting exactly where its step puts it shares its whole's buffer: a Reshape's output
  // on its input's bytes, a Concat input on its slice of the output (its producer wrote it
  // there; the Concat kernel skips it). Only when both belong to the program running the step,
  // as the compiler plans them, neither is a loop body's formal or result (the Loop step
  // copies results into formals one by one, so a result sharing a formal's bytes would be
  // overwritten before it is copied), and each is written once (so they always hold the same
  // bytes; a Reshape's input at most once: it may be an input of its program). A Concat input
  // must be written before it is read and the output not read before it is written (no value
  // carried around a loop body), and the input joins only while it is not yet part of another
  // buffer (a second listing of it, or another Concat, is then a copy from where it is).
  // Otherwise the two are checked apart.
  void GroupViews() {
    group_.resize(tensors_.size());
    for (size_t t = 0; t < group_.size(); ++t) group_[t] = static_cast<int>(t);
    for (const View& v : views_) {
      const ExecTensor &part = tensors_[v.part], &whole = tensors_[v.whole];
      const Live &lp = live_[v.part], &lw = live_[v.whole];
      if (part.storage != Storage::kArena || whole.storage != Storage::kArena ||
          part.offset != whole.offset + v.offset || lp.owner != v.program || lw.owner != v.program || lp.pinned ||
          lw.pinned)
        continue;
      if (v.concat) {
        if (lp.writes != 1 || lw.writes != 1 || lp.first_write >= lp.first_read || lw.first_read < lw.first_write ||
            Find(v.part) != v.part || Find(v.whole) != v.whole)
          continue;
        group_[v.part] = v.whole;  // the output covers the input: it stands for the buffer
      } else {
        if (part.desc.nbytes() != whole.desc.nbytes() || lp.writes != 1 || lw.writes > 1) continue;
        group_[Find(v.part)] = Find(v.whole);
      }
    }
    for (const InPlace& ip : in_place_) GroupInPlace(ip);
  }

  // A step's output at the bytes of its in-place input (Step::in_place_input) joins that
  // input's buffer when the input's whole buffer is dead after the step: all its members belong
  // to the step's program, none is used later or is a loop body's formal or result, the input
  // is written once before the step and listed once by it (so the step reads no other operand
  // from those bytes), and the output is written by the step alone. In program order, so chains
  // (ResNet's Sum of one block being the output of the previous) join one buffer. Otherwise the
  // two are checked apart, and refused: both are live at the step.
  void GroupInPlace(const InPlace& ip) {
    const Step& s = programs_[ip.program].steps[ip.step];
    const int in = s.inputs[s.in_place_input], out = s.outputs[0];
    const ExecTensor &ti = tensors_[in], &to = tensors_[out];
    const Live &li = live_[in], &lo = live_[out];
    const Range r = info_[ip.program].steps[ip.step];
    if (ti.storage != Storage::kArena || to.storage != Storage::kArena || ti.offset != to.offset ||
        std::count(s.inputs.begin(), s.inputs.end(), in) != 1 || lo.owner != ip.program || lo.pinned ||
        lo.writes != 1 || lo.first_read < lo.first_write || li.writes != 1 || li.first_write >= r.start)
      return;
    const int whole = Find(in), root = Find(out);
    if (whole == root) return;
    const ExecTensor &tw = tensors_[whole], &tr = tensors_[root];
    if (tw.offset < tr.offset || tw.offset + tw.desc.nbytes() > tr.offset + tr.desc.nbytes()) return;
    for (size_t t = 0; t < live_.size(); ++t) {
      const Live& l = live_[t];
      if (!l.used || Find(static_cast<int>(t)) != whole) continue;
      if (l.owner != ip.program || l.pinned || l.range.end > r.end) return;
    }
    group_[whole] = root;
  }

  void Sweep() {
    // Each buffer (a tensor and its views, all within its bytes): live range = hull of its
    // members' ranges.
    std::vector<int> buffers;
    std::vector<Range> range(tensors_.size());
    std::vector<bool> seen(tensors_.size(), false);
    for (size_t t = 0; t < live_.size(); ++t) {
      if (!live_[t].used) continue;
      const int g = Find(static_cast<int>(t));
      if (!seen[g]) {
        seen[g] = true;
        range[g] = live_[t].range;
        if (tensors_[g].desc.nbytes() > 0) buffers.push_back(g);
      } else {
        range[g].start = std::min(range[g].start, live_[t].range.start);
        range[g].end = std::max(range[g].end, live_[t].range.end);
      }
    }
    std::sort(buffers.begin(), buffers.end(), [&](int a, int b) { return range[a].start < range[b].start; });
    // Live buffers by offset (pairwise disjoint, so only the neighbours of a new one can
    // overlap it), and by end point to retire them.
    std::set<std::pair<uint64_t, int>> by_offset;
    using Ending = std::pair<int64_t, int>;
    std::priority_queue<Ending, std::vector<Ending>, std::greater<Ending>> by_end;
    for (int b : buffers) {
      while (!by_end.empty() && by_end.top().first < range[b].start) {
        by_offset.erase({tensors_[by_end.top().second].offset, by_end.top().second});
        by_end.pop();
      }
      const uint64_t begin = tensors_[b].offset, end = begin + tensors_[b].desc.nbytes();
      auto next = by_offset.lower_bound({begin, -1});
      if (next != by_offset.end() && next->first < end) Overlap(next->second, b, range);
      if (next != by_offset.begin()) {
        const int prev = std::prev(next)->second;
        if (tensors_[prev].offset + tensors_[prev].desc.nbytes() > begin) Overlap(prev, b, range);
      }
      by_offset.insert({begin, b});
      by_end.push({range[b].end, b});
    }
  }

  std::string Describe(int t) const {
    const ExecTensor& x = tensors_[t];
    return "Executable.tensors[" + std::to_string(t) + "] '" + x.name + "' [" + std::to_string(x.offset) + ", " +
           std::to_string(x.offset + x.desc.nbytes()) + ")";
  }

  std::string StepName(int program, int step) const {
    const Step& s = programs_[program].steps[step];
    return "step #" + std::to_string(step) + " (" + s.op + " '" + s.node + "') of program '" + programs_[program].name +
           "'";
  }

  std::string PointName(int64_t time) const {
    const Point& p = points_[time];
    switch (p.kind) {
      case PointKind::kProgramStart: return "the start of program '" + programs_[p.program].name + "'";
      case PointKind::kProgramEnd: return "the end of program '" + programs_[p.program].name + "'";
      case PointKind::kStepEnd: return "the end of " + StepName(p.program, p.step);
      case PointKind::kStep: break;
    }
    return StepName(p.program, p.step);
  }

  [[noreturn]] void Overlap(int live, int added, const std::vector<Range>& range) const {
    auto lifetime = [&](int t) {
      std::string views;
      for (size_t v = 0; v < group_.size(); ++v) {
        int g = static_cast<int>(v);
        while (group_[g] != g) g = group_[g];
        if (g == t && static_cast<int>(v) != t)
          views += (views.empty() ? " with its views '" : "', '") + tensors_[v].name;
      }
      if (!views.empty()) views += "'";
      return "'" + tensors_[t].name + "'" + views + " from " + PointName(range[t].start) + " to " +
             PointName(range[t].end);
    };
    Fail(Describe(live) + " overlaps " + Describe(added) + " in the arena while both are live at " +
         PointName(range[added].start) + " (live: " + lifetime(live) + "; " + lifetime(added) + ")");
  }

  [[noreturn]] void Fail(const std::string& what) const {
    throw Error(ErrorCode::kInvalidArgument, source_ + ": arena plan: " + what);
  }

  const std::string& source_;
  const std::vector<ExecTensor>& tensors_;
  const std::vector<Program>& programs_;
  std::vector<ProgramInfo> info_;
  std::vector<Live> live_;
  std::vector<int> tree_;  // programs of the tree, in layout order
  std::vector<Point> points_;
  std::vector<View> views_;
  std::vector<InPlace> in_place_;
  std::vector<int> group_;  // union-find over tensors: a view's group is its source's
};

}  // namespace

void CheckArenaPlan(const std::string& source, const std::vector<ExecTensor>& tensors,
                    const std::vector<Program>& programs, const std::vector<int>& roots) {
  std::set<int> done;
  for (int root : roots)
    if (done.insert(root).second) TreeCheck(source, tensors, programs).Run(root);
}

}  // namespace tfpopef
