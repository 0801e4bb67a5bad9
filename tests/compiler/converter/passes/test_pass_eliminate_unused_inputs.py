import logging

import numpy as np
from onnx import helper

from compiler import Compiler
from compiler.converter import DEFAULT_PIPELINE, Converter
from compiler_test_helpers import F32, assert_same_outputs, make_model, random_feeds, run_pass


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _logger():
    logger = logging.getLogger("test_eliminate_unused_inputs")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    handler = _Lines()
    logger.handlers[:] = [handler]
    return logger, handler.lines


def _with_captured_constants():
    # tf2onnx's shape of it: a Keras layer's captured mean/variance folded into constants, the
    # captures still listed as inputs.
    nodes = [helper.make_node("Sub", ["image", "mean"], ["centred"]), helper.make_node("Relu", ["centred"], ["O"])]
    return make_model(nodes, [("unknown:0", F32, [1, 1, 1, 3]), ("image", F32, [1, 2, 2, 3]),
                              ("unknown_0:0", F32, [1, 1, 1, 3])],
                      [("O", F32, [1, 2, 2, 3])], {"mean": np.full((1, 1, 1, 3), 0.5, np.float32)})


def test_unread_inputs_are_dropped_with_one_info_line_each():
    model = _with_captured_constants()
    logger, lines = _logger()
    out = run_pass(model, "eliminate_unused_inputs", logger=logger)
    assert [i.name for i in out.graph.input] == ["image"]
    assert lines == ["eliminate_unused_inputs: dropping graph input 'unknown:0': no node reads it",
                     "eliminate_unused_inputs: dropping graph input 'unknown_0:0': no node reads it"]
    feeds = random_feeds(model)
    assert_same_outputs(model, out, feeds, after_feeds={"image": feeds["image"]})


def test_inputs_read_by_a_subgraph_or_passed_to_an_output_stay():
    then_graph = helper.make_graph([helper.make_node("Identity", ["X"], ["t"])], "then", [],
                                   [helper.make_tensor_value_info("t", F32, [2])])
    else_graph = helper.make_graph([helper.make_node("Neg", ["X"], ["e"])], "else", [],
                                   [helper.make_tensor_value_info("e", F32, [2])])
    nodes = [helper.make_node("If", ["cond"], ["O"], then_branch=then_graph, else_branch=else_graph)]
    model = make_model(nodes, [("cond", 9, []), ("X", F32, [2]), ("P", F32, [3])], [("O", F32, [2]), ("P", F32, [3])])
    logger, lines = _logger()
    out = run_pass(model, "eliminate_unused_inputs", logger=logger)
    assert [i.name for i in out.graph.input] == ["cond", "X", "P"] and lines == []


# After dead_code_elimination, so that an input only dead nodes read is unread too.
WITH_THE_PASS = DEFAULT_PIPELINE[:DEFAULT_PIPELINE.index("dead_code_elimination") + 1] + [
    "eliminate_unused_inputs"] + DEFAULT_PIPELINE[DEFAULT_PIPELINE.index("dead_code_elimination") + 1:]


def test_the_default_pipeline_keeps_declared_inputs_and_naming_the_pass_drops_them():
    nodes = [helper.make_node("Relu", ["X"], ["O"]), helper.make_node("Neg", ["D"], ["unused"])]
    model = make_model(nodes, [("X", F32, [2]), ("D", F32, [2])], [("O", F32, [2])])
    assert [i.name for i in Converter().convert(model).graph.input] == ["X", "D"]
    assert [i.name for i in Converter(used_passes=WITH_THE_PASS).convert(model).graph.input] == ["X"]


def test_the_compiled_executable_asks_only_for_the_inputs_it_reads():
    exe = Compiler.compile(Converter(used_passes=WITH_THE_PASS).convert(_with_captured_constants()))
    assert [a["name"] for a in exe.anchors() if a["direction"] == "input"] == ["image"]
