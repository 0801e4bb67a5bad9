"""Whether every node of a converted model has a kernel: each node's rule is asked for its
KernelCall, which checks op type, dtypes, attributes and constant operands with the errors the
compile step would raise, without lowering the graph (no schedule, weights or memory plan)."""
from typing import Dict

import onnx

from compiler.lowering_rules.node_context import NodeContext
from compiler.lowering_rules.registry import find_rule, is_control_flow
from compiler.onnx_graph.constants import Constants, is_constant_node
from compiler.onnx_graph.graph_edit import opset_version
from compiler.onnx_graph.tensor_types import TensorType
from compiler.onnx_graph.topo_order import topological_order


def check_lowerable(model: onnx.ModelProto, types: Dict[str, TensorType], model_name: str = "<model>") -> None:
    """Raises the first node's UnsupportedOpError / LoweringError. Run-time If and Loop bodies are
    prepared and checked when the compile step lowers them. types: the model's inferred types."""
    graph = model.graph
    opset = opset_version(model)
    constants = Constants(graph, opset, model_name)
    nodes = list(graph.node)
    for idx in topological_order(graph, model_name):
        node = nodes[idx]
        if is_constant_node(node) or is_control_flow(node):
            continue
        find_rule(node, model_name)(NodeContext(node, opset, types, constants, model_name))
