"""benchmarks/conv_precision_classes.py --excess: steps and op types ranked by how much longer
their float16 run takes, a step only one program has counting 0 µs in the other."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))

from conv_precision_classes import print_excess  # noqa: E402


def test_excess_ranks_steps_and_op_types_by_float16_minus_float32(capsys):
    steps = {
        "fp32": {"conv_a": ("NchwcConv", 100.0), "conv_b": ("NchwcConv", 50.0), "pool": ("NchwcAveragePool", 30.0)},
        "fp16": {"conv_a": ("NchwcConv", 90.0), "conv_b": ("NchwcConv", 80.0), "pool": ("NchwcAveragePool", 22.0),
                 "head_adapter": ("MatMul", 5.0)},
    }
    print_excess(steps, {"conv_a": "1x1", "conv_b": "3x3"}, top=3)
    lines = capsys.readouterr().out.splitlines()
    by_op = {line.split()[0]: [float(v) for v in line.split()[1:]] for line in lines[1:5]}
    assert [line.split()[0] for line in lines[1:4]] == ["NchwcConv", "MatMul", "NchwcAveragePool"]
    assert by_op["NchwcConv"] == [150.0, 170.0, 20.0]
    assert by_op["MatMul"] == [0.0, 5.0, 5.0]  # only in the float16 program
    assert by_op["NchwcAveragePool"] == [30.0, 22.0, -8.0]
    assert by_op["all"] == [180.0, 197.0, 17.0]
    ranked = [line.split()[0] for line in lines[6:]]
    assert ranked == ["conv_b", "head_adapter", "pool"]  # +30, +5, -8 (conv_a's -10 cut by top=3)
    assert lines[6].split()[2] == "3x3"
