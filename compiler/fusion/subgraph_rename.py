"""Gives one model's LoweredGraph its place in a fused executable: every tensor and step name
gets the `graph{i}/` prefix (names stay unique across subgraphs and say which model they come
from) and the anchors get their fused names (anchor_names)."""
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

from compiler.errors import ConversionError
from compiler.fusion.anchor_names import input_alias, input_anchor, output_anchor, subgraph_prefix
from compiler.lowering.ir import ControlStep, KernelStep, LoweredGraph


@dataclasses.dataclass(frozen=True)
class AnchorRename:
    fused: str            # the anchor's name in the fused executable
    original: str         # the name in the source model
    direction: str        # "input" or "output"
    aliases: Tuple[str, ...] = ()


def rename_subgraph(graph: LoweredGraph, index: int, model_label: str,
                    source_inputs: Optional[Sequence[str]] = None) -> Tuple[LoweredGraph, List[AnchorRename]]:
    """A renamed copy of `graph` (lowered with the model's own names) and its anchor renames,
    inputs then outputs in the model's order. Streams are numbered by position among
    `source_inputs` (the source model's inputs; default: the graph's), so an input the converter
    dropped as unread leaves its number unused instead of shifting the later streams."""
    prefix = subgraph_prefix(index)
    position = {name: k for k, name in enumerate(graph.inputs if source_inputs is None else source_inputs)}
    inputs = {original: input_anchor(index, position[original]) for original in graph.inputs}
    outputs = {original: output_anchor(index, original) for original in graph.outputs}
    by_fused_input = {fused: original for original, fused in inputs.items()}
    for original, fused in outputs.items():
        if fused in by_fused_input:
            raise ConversionError(
                f"{model_label}: output '{original}' would be the fused anchor '{fused}', which is already the fused "
                f"name of input '{by_fused_input[fused]}' (inputs are named {prefix}stream<position>); rename the "
                f"output in the model")
    taken = set(inputs.values()) | set(outputs.values())
    # An input named like another input's stream (e.g. 'stream1' at position 0) keeps no alias:
    # the stream name wins, so anchor names stay unambiguous.
    aliases: Dict[str, Tuple[str, ...]] = {}
    for original in inputs:
        alias = input_alias(index, original)
        aliases[original] = () if alias in taken else (alias,)

    renamed = LoweredGraph(graph.name, batch_size=graph.batch_size, batch_axis=graph.batch_axis)
    for t in graph.tensors.values():
        anchor, tensor_aliases = t.anchor, list(t.aliases)
        if t.storage == "input":
            anchor, tensor_aliases = inputs[t.anchor], list(aliases[t.anchor])
        elif t.storage == "output":
            anchor = outputs[t.anchor]
        renamed.add(dataclasses.replace(t, name=prefix + t.name, anchor=anchor, aliases=tensor_aliases))
    renamed.steps = _rename_steps(graph.steps, prefix)
    renamed.inputs = [inputs[n] for n in graph.inputs]
    renamed.outputs = [outputs[n] for n in graph.outputs]
    renames = [AnchorRename(inputs[n], n, "input", aliases[n]) for n in graph.inputs]
    renames += [AnchorRename(outputs[n], n, "output") for n in graph.outputs]
    return renamed, renames


def _rename_steps(steps: List[KernelStep], prefix: str) -> List[KernelStep]:
    renamed = []
    for s in steps:
        fields = dict(op=s.op, name=prefix + s.name, inputs=[prefix + n for n in s.inputs],
                      outputs=[prefix + n for n in s.outputs], attrs=dict(s.attrs))
        if isinstance(s, ControlStep):  # If/Loop: sub-programs and tensor-valued fields too
            renamed.append(ControlStep(**fields, programs={r: _rename_steps(p, prefix) for r, p in s.programs.items()},
                                       tensor_attrs={k: _prefixed(v, prefix) for k, v in s.tensor_attrs.items()},
                                       pinned=[prefix + n for n in s.pinned]))
        else:
            renamed.append(KernelStep(**fields))
    return renamed


def _prefixed(value, prefix: str):
    if value is None:
        return None
    if isinstance(value, str):
        return prefix + value
    return [_prefixed(v, prefix) for v in value]
