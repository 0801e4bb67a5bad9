"""The lowering of one ONNX model after kernel fusion: its program, its arena plan and its
weights, checked to fit the device (compiler/popef_writer writes them as a PopEF file)."""
import dataclasses
from typing import Optional

import onnx

from compiler.lowering.control_flow import PrepareBody
from compiler.lowering.device_memory import available_bytes, check_anchor_sizes, check_device_memory
from compiler.lowering.ir import LoweredGraph
from compiler.lowering.lower_graph import lower_graph
from compiler.lowering.memory_plan import ArenaPlan, plan_arena
from compiler.lowering.weights import WeightStore


@dataclasses.dataclass
class LoweredModel:
    graph: LoweredGraph
    plan: ArenaPlan
    weights: WeightStore


def lower_model(model: onnx.ModelProto, options, model_name: str = "<model>",
                prepare_body: Optional[PrepareBody] = None) -> LoweredModel:
    """`options` is a validated CompilerOptions; prepare_body: see lower_graph."""
    weights = WeightStore()
    graph = lower_graph(model, weights, model_name, "graph0", options.batch_size, options.batch_axis, prepare_body)
    available = available_bytes(options.num_ipus, options.device_memory_bytes)
    plan = plan_arena(graph)  # sizes and offsets only: nothing is allocated for the tensors
    check_device_memory(weights.size, plan.size, available, options.ipu_version, model_name)
    check_anchor_sizes(graph.anchor_tensors("input") + graph.anchor_tensors("output"), available,
                       options.ipu_version, model_name)
    return LoweredModel(graph, plan, weights)
