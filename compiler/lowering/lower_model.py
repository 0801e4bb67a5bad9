"""The compile step after kernel fusion: lower one ONNX model, plan its arena, check it fits the
device and emit the PopEF bytes."""
import dataclasses
from typing import Optional, Sequence

import onnx

from compiler.lowering.control_flow import PrepareBody
from compiler.lowering.device_memory import available_bytes, check_anchor_sizes, check_device_memory
from compiler.lowering.ir import LoweredGraph
from compiler.lowering.lower_graph import lower_graph
from compiler.lowering.memory_plan import ArenaPlan, plan_arena
from compiler.lowering.popef_emitter import EmittedPopef, emit_popef
from compiler.lowering.weights import WeightStore
from compiler.version import PRODUCER


@dataclasses.dataclass
class LoweredModel:
    graph: LoweredGraph
    plan: ArenaPlan
    weights: WeightStore
    popef: EmittedPopef


def lower_model(model: onnx.ModelProto, options, model_name: str = "<model>",
                passes_run: Optional[Sequence[str]] = None, converter_options: Optional[dict] = None,
                prepare_body: Optional[PrepareBody] = None) -> LoweredModel:
    """`options` is a validated CompilerOptions; passes_run and converter_options are recorded
    in the `compiler` Opaque blob; prepare_body: see lower_graph."""
    weights = WeightStore()
    graph = lower_graph(model, weights, model_name, "graph0", options.batch_size, options.batch_axis, prepare_body)
    available = available_bytes(options.num_ipus, options.device_memory_bytes)
    plan = plan_arena(graph)  # sizes and offsets only: nothing is allocated for the tensors
    check_device_memory(weights.size, plan.size, available, options.ipu_version, model_name)
    check_anchor_sizes(graph.anchor_tensors("input") + graph.anchor_tensors("output"), available,
                       options.ipu_version, model_name)
    compiler_info = {"producer": PRODUCER, "source_model": model_name, "options": options.to_dict(),
                     "converter_options": dict(converter_options or {}), "passes": list(passes_run or [])}
    popef = emit_popef([graph], [plan], weights, options.ipu_version, options.num_ipus,
                       opaques={"compiler": compiler_info})
    return LoweredModel(graph, plan, weights, popef)
