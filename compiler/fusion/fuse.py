"""Model fusion: N ONNX models -> one executable whose `main` runs only the subgraph selected by
the `index` input.

Each model is converted with its own settings (precision, shapes, batch size, opset...),
lowered into ONE shared WeightStore (identical constants of different models are stored once),
renamed to its fused anchor names and given its own arena plan; the arena of the executable is
the largest plan, since one subgraph runs at a time. Device memory needed = deduplicated
weights + that largest arena.
"""
import dataclasses
from typing import List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import onnx

from compiler.converter import Converter
from compiler.converter.pipeline import prepare_control_flow_body
from compiler.errors import CompileError, ConversionError, DeviceMemoryError
from compiler.executable import Executable
from compiler.frontends.model_loading import load_model
from compiler.fusion.anchor_names import INDEX_ANCHOR, output_anchor, subgraph_prefix
from compiler.fusion.entry import FusionEntry, normalize_entries
from compiler.fusion.fusion_map import FUSION_OPAQUE, SubgraphOrigin, fusion_map
from compiler.fusion.subgraph_rename import AnchorRename, rename_subgraph
from compiler.kernel_fusion import apply_kernel_fusion
from compiler.lowering.device_memory import available_bytes, check_anchor_sizes
from compiler.lowering.ir import LoweredGraph
from compiler.lowering.lower_graph import lower_graph
from compiler.lowering.memory_plan import ArenaPlan, plan_arena
from compiler.lowering.weights import StoredWeight, WeightStore
from compiler.onnx_graph.graph_edit import opset_version, runtime_inputs
from compiler.options import CompilerOptions
from compiler.popef_writer import EmittedPopef, emit_popef
from compiler.version import PRODUCER

EntryLike = Union[FusionEntry, Mapping]


@dataclasses.dataclass
class FusedModel:
    entries: List[FusionEntry]       # normalized: defaults filled, names set
    graphs: List[LoweredGraph]       # renamed to the fused anchor names
    plans: List[ArenaPlan]
    weights: WeightStore             # shared, deduplicated
    popef: EmittedPopef


class _SubgraphWeights:
    """The shared WeightStore as one model's lowering sees it: TensorData blobs get the
    subgraph's prefix (`graph1/W`), so the file says which model a weight came from; a weight
    identical to one stored earlier keeps the earlier name and bytes."""

    def __init__(self, store: WeightStore, prefix: str):
        self.store, self.prefix = store, prefix

    def add(self, name: str, array: np.ndarray) -> StoredWeight:
        return self.store.add(self.prefix + name, array)


def fuse_models(entries: Sequence[EntryLike], options: Optional[CompilerOptions] = None) -> Executable:
    """entries: FusionEntry objects or mappings with the same keys (the YAML entries);
    options: global settings (ipu_version, device memory) and the defaults of batch_size,
    batch_axis and max_tensor_size for entries that leave them unset."""
    return Executable(lower_fused(entries, options).popef.data)


def lower_fused(entries: Sequence[EntryLike], options: Optional[CompilerOptions] = None) -> FusedModel:
    options = (options if options is not None else CompilerOptions()).validate()
    checked = normalize_entries(entries)
    weights = WeightStore()
    graphs, plans, origins, renames, compiled = [], [], [], [], []
    for index, entry in enumerate(checked):
        graph, origin, names, record = _lower_one(index, entry, options, weights)
        graphs.append(graph)
        plans.append(plan_arena(graph))
        origins.append(origin)
        renames.append(names)
        compiled.append(record)
    _check_device_memory(checked, weights, plans, options)
    opaques = {FUSION_OPAQUE: fusion_map(INDEX_ANCHOR, graphs, origins, renames),
               "compiler": {"producer": PRODUCER, "options": options.to_dict(), "models": compiled}}
    popef = emit_popef(graphs, plans, weights, options.ipu_version, options.num_ipus, opaques=opaques,
                       index_anchor=INDEX_ANCHOR)
    return FusedModel(checked, graphs, plans, weights, popef)


def model_label(entry: FusionEntry) -> str:
    """How messages name a fused model: `config.yaml: model_fusion[1] (model1.onnx)`."""
    return f"{entry.where} ({entry.source_label()})"


def _with_where(error: CompileError, where: str) -> CompileError:
    """The error with the entry's label in front, unless it already names it."""
    return error if str(error).startswith(where) else type(error)(f"{where}: {error}")


def _lower_one(index: int, entry: FusionEntry, options: CompilerOptions,
               weights: WeightStore) -> Tuple[LoweredGraph, SubgraphOrigin, List[AnchorRename], dict]:
    label = model_label(entry)
    batch_size = entry.batch_size if entry.batch_size is not None else options.batch_size
    batch_axis = entry.batch_axis if entry.batch_axis is not None else options.batch_axis
    max_tensor_size = entry.max_tensor_size if entry.max_tensor_size is not None else options.max_tensor_size
    try:  # option errors do not know which entry they belong to
        converter = Converter(input_shape=entry.input_shape, precision=entry.precision, batch_size=batch_size,
                              batch_axis=batch_axis, max_tensor_size=max_tensor_size,
                              max_input_bytes=available_bytes(options.num_ipus, options.device_memory_bytes),
                              used_passes=entry.passes or None, skip_passes=entry.skip_passes or None,
                              convert_version=entry.convert_version, model_name=label)
    except CompileError as e:
        raise _with_where(e, entry.where) from None
    try:
        model, _ = load_model(entry.input_model, label, entry.signature_name, entry.convert_version)
    except CompileError as e:
        raise _with_where(e, entry.where) from None
    _check_unique_outputs(model, index, label)
    source_inputs = [i.name for i in runtime_inputs(model.graph)]
    converted = converter.convert(model)
    lowered = lower_graph(apply_kernel_fusion(converted, options, label), _SubgraphWeights(weights, subgraph_prefix(index)), label, entry.name,
                          batch_size, batch_axis, prepare_control_flow_body)
    check_anchor_sizes(lowered.anchor_tensors("input") + lowered.anchor_tensors("output"),
                       available_bytes(options.num_ipus, options.device_memory_bytes), options.ipu_version, label)
    graph, names = rename_subgraph(lowered, index, label, source_inputs)
    origin = SubgraphOrigin(entry.source_label(), entry.precision, opset_version(converted))
    record = {"index": index, "name": entry.name, "source_model": entry.source_label(),
              "converter_options": converter.options, "passes": list(converter.passes_run)}
    return graph, origin, names, record


def _check_unique_outputs(model: onnx.ModelProto, index: int, label: str) -> None:
    names = [o.name for o in model.graph.output]
    for name in names:
        if names.count(name) > 1:
            raise ConversionError(f"{label}: output '{name}' is listed {names.count(name)} times among the graph's "
                                  f"outputs; each output becomes the anchor '{output_anchor(index, name)}', so output "
                                  f"names must be unique within a model")


def _check_device_memory(entries: Sequence[FusionEntry], weights: WeightStore, plans: Sequence[ArenaPlan],
                         options: CompilerOptions) -> None:
    largest = max(range(len(plans)), key=lambda i: plans[i].size)
    arena = plans[largest].size
    available = available_bytes(options.num_ipus, options.device_memory_bytes)
    if weights.size + arena > available:
        raise DeviceMemoryError(
            f"the fused executable of {len(entries)} model(s) needs {weights.size + arena:,} bytes of device memory "
            f"(weights of all models, deduplicated, {weights.size:,} + activations {arena:,} of the largest subgraph, "
            f"{model_label(entries[largest])}) but the {options.ipu_version} device has {available:,}; fuse fewer "
            f"models, reduce batch sizes or input shapes, or use precision fp16")
