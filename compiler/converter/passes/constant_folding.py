from typing import List, Optional, Tuple

import numpy as np
from onnx import helper, numpy_helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.constants import Constants, is_constant_node
from compiler.onnx_graph.graph_edit import opset_version, remove_nodes, remove_value_info, subgraphs
from compiler.onnx_graph.tensor_types import DTYPE_NAMES, TensorType
from compiler.onnx_graph.topo_order import topological_order
from compiler.onnx_graph.type_inference import infer_node_types, infer_types

# Folding these would freeze one random draw into the model.
_NON_DETERMINISTIC = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                      "Multinomial", "Bernoulli"}
# The reference implementation of a window op pads its input first; a padded input above this many
# elements (pads of 2^20 on a 4x4 image) would take tens of seconds and gigabytes to fold, so such a
# node is left for the lowering.
_MAX_PADDED_ELEMENTS = 1 << 24
_WINDOW_OPS = {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool", "AveragePool", "LpPool"}
# Constant inputs up to this many elements are shown to the inference of a node that stays (the
# shape-like values a Reshape/Expand/Slice reads; weights never decide a shape).
_MAX_SHAPE_VALUE_ELEMENTS = 4096
# Each round re-runs shape inference, which may make more Shape nodes static; real models settle
# in two or three rounds.
_MAX_ROUNDS = 16


@register("constant_folding", kind="fold")
def constant_folding(model, ctx):
    """Evaluate nodes with constant inputs (and Shape/Size of static tensors); results above max_tensor_size stay unfolded."""
    opsets = {(imp.domain if imp.domain != "ai.onnx" else ""): int(imp.version) for imp in model.opset_import}
    opsets.setdefault("", opset_version(model))
    for _ in range(_MAX_ROUNDS):
        if not _fold_round(model, ctx, opsets):
            break
    return model


def _fold_round(model, ctx, opsets) -> bool:
    graph = model.graph
    if not graph.node:
        return False
    types = dict(infer_types(model, strict=False, model_name=ctx.model_name).types)
    constants = Constants(graph, opsets[""], ctx.model_name)
    folded, new_values = [], {}
    nodes = list(graph.node)
    for idx in topological_order(graph, ctx.model_name):
        node = nodes[idx]
        values = _try_fold(node, constants, types, ctx, opsets)
        if values is None:
            _refine_types(node, types, constants, opsets)
            continue
        folded.append(node)
        for name, value in values:
            constants.add(name, value)
            new_values[name] = value
            types[name] = TensorType(helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
    if not folded:
        return False
    remove_nodes(graph, folded)
    for name, value in new_values.items():
        graph.initializer.append(numpy_helper.from_array(value, name))
    remove_value_info(graph, new_values)
    return True


def _try_fold(node, constants, types, ctx, opsets) -> Optional[List[Tuple[str, np.ndarray]]]:
    if node.domain not in ("", "ai.onnx") or subgraphs(node) or node.op_type in _NON_DETERMINISTIC:
        return None
    if is_constant_node(node):  # always moved to an initializer: it is a constant already
        return [(node.output[0], constants.value(node.output[0]))]
    if node.op_type in ("Shape", "Size") and node.input[0] not in constants:
        t = types.get(node.input[0])
        if t is None or not t.is_static:
            return None
        if node.op_type == "Size":
            return [(node.output[0], np.array(t.numel, dtype=np.int64))]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        # Python slicing clamps and wraps negative bounds exactly as Shape-15's start/end do.
        dims = list(t.shape)[attrs.get("start", 0):attrs.get("end", len(t.shape))]
        return [(node.output[0], np.array(dims, dtype=np.int64))]
    if not node.output or not all(name == "" or name in constants for name in node.input):
        return None
    for out in node.output:  # skip before computing when inference already knows it is too big
        t = types.get(out)
        if t is not None and t.is_static and t.elem_type in DTYPE_NAMES and not ctx.fits_max_tensor_size(t.nbytes):
            ctx.logger.info("not folding %s (%s): output %s is %d bytes > max_tensor_size %d",
                            node.name, node.op_type, out, t.nbytes, ctx.max_tensor_size)
            return None
    feeds = {name: constants.value(name) for name in node.input if name}
    if node.op_type in _WINDOW_OPS and _padded_elements(node, feeds) > _MAX_PADDED_ELEMENTS:
        ctx.logger.info("not folding %s (%s): its padded input exceeds %d elements", node.name, node.op_type,
                        _MAX_PADDED_ELEMENTS)
        return None
    try:
        results = _evaluate(node, feeds, opsets)
    except Exception as e:  # an op the reference cannot run is left for the lowering to report
        ctx.logger.info("not folding %s (%s): %s", node.name, node.op_type, e)
        return None
    folded = []
    for name, value in zip([n for n in node.output if n], results):
        value = np.asarray(value)
        t = types.get(name)
        if t is not None and t.elem_type in DTYPE_NAMES:
            if np.iscomplexobj(value):
                ctx.logger.info("not folding %s (%s): the reference gave complex values for %s", node.name,
                                node.op_type, name)
                return None  # the declared real type would silently drop the imaginary part
            value = value.astype(helper.tensor_dtype_to_np_dtype(t.elem_type), copy=False)
        if not ctx.fits_max_tensor_size(value.nbytes):
            return None
        folded.append((name, value))
    return folded


def _refine_types(node, types, constants, opsets) -> None:
    """Gives a node that stays the static output types its inputs now allow. The round's shape
    inference ran before its folds: a Reshape whose target was only folded now (a Concat of
    ReduceProd/Max of Shape values, which ONNX data propagation does not evaluate) had unknown
    output dims, and so had everything after it until a broadcast against a static dim other
    than 1 pins them again. At batch 1 nothing does (1 broadcasts against any dim), so without
    this each transformer block would take its own rounds."""
    outputs = [name for name in node.output if name]
    if all(name in types and types[name].is_static for name in outputs):
        return
    inputs = {name: types[name] for name in node.input if name in types}
    values = {name: constants.value(name) for name, t in inputs.items()
              if name in constants and t.is_static and t.numel <= _MAX_SHAPE_VALUE_ELEMENTS}
    for name, t in infer_node_types(node, inputs, values, opsets).items():
        if t.is_static and name in outputs:
            types[name] = t


def _padded_elements(node, feeds) -> int:
    """Elements of the first input after its `pads` are applied (exact Python integers)."""
    shape = list(np.shape(feeds[node.input[0]])) if node.input and node.input[0] in feeds else []
    pads = next((list(a.ints) for a in node.attribute if a.name == "pads"), [])
    spatial = len(shape) - 2
    if spatial <= 0:
        return int(np.prod(shape, dtype=object)) if shape else 0
    if len(pads) == 2 * spatial:
        extra = [max(pads[i], 0) + max(pads[i + spatial], 0) for i in range(spatial)]
    else:  # malformed pads (the reference evaluator may still use them): bound by the largest
        extra = [2 * max(pads + [0])] * spatial
    return int(np.prod(shape[:2] + [shape[2 + i] + extra[i] for i in range(spatial)], dtype=object))


def _evaluate(node, feeds, opsets):
    """Runs one node with onnx's reference implementation at the model's opsets (a bare
    NodeProto would be run with the newest opset, e.g. Unsqueeze-13 for an opset-11 node)."""
    from onnx.reference import ReferenceEvaluator  # slow to import; only when there is work
    inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
              for name, value in feeds.items()]
    outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
    graph = helper.make_graph([node], "fold", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    return ReferenceEvaluator(model).run(None, feeds)
