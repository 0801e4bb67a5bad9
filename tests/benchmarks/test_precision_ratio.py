"""benchmarks/precision_ratio.py --steps: each step's µs per call in the two profiled programs,
matched by node name, the largest float16 excess first (a step only one program has counts 0 µs
in the other)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))

from precision_ratio import print_step_excess  # noqa: E402


class FakeRunner:
    def __init__(self, steps):
        self.steps = steps

    def profile(self):
        return [{"node": node, "op": op, "total_us": us} for node, (op, us) in self.steps.items()]


def test_steps_ranked_by_float16_minus_float32_per_call(capsys):
    runners = {
        "fp32": FakeRunner({"block_1": ("NchwcInvertedResidual", 400.0), "head": ("NchwcConv", 200.0),
                            "mean": ("ReduceMean", 20.0)}),
        "fp16": FakeRunner({"block_1": ("NchwcInvertedResidual", 360.0), "head": ("NchwcConv", 260.0),
                            "mean": ("ReduceMean", 30.0), "adapter": ("Cast", 8.0)}),
    }
    print_step_excess(runners, calls=2, top=3)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].strip() == "all steps us per call: fp32 310.0, fp16 329.0"
    rows = [line.split() for line in lines[1:]]
    assert [r[0] for r in rows] == ["head", "mean", "adapter"]  # +30, +5, +4 (block_1's -20 cut by top=3)
    assert [float(r[-1]) for r in rows] == [30.0, 5.0, 4.0]
    assert rows[2][2:4] == ["0.0", "4.0"]  # only in the float16 program
