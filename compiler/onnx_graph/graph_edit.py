"""Queries and edits on an ONNX graph shared by the passes: who produces/consumes a tensor,
names used by subgraphs (If/Loop bodies) from the outer scope, bypassing a node."""
from collections import defaultdict
from typing import Dict, Iterable, List, Set

import onnx


def opset_version(model: onnx.ModelProto, domain: str = "") -> int:
    for imp in model.opset_import:
        if imp.domain in (domain, "ai.onnx" if domain == "" else domain):
            return int(imp.version)
    return 1 if domain else onnx.defs.onnx_opset_version()


def runtime_inputs(graph: onnx.GraphProto) -> List[onnx.ValueInfoProto]:
    """Graph inputs fed at run time: old models (IR < 4) also list initializers as inputs."""
    initializers = {t.name for t in graph.initializer}
    return [i for i in graph.input if i.name not in initializers]


def subgraphs(node: onnx.NodeProto) -> List[onnx.GraphProto]:
    found = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            found.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            found.extend(attr.graphs)
    return found


def outer_references(graph: onnx.GraphProto) -> Set[str]:
    """Names a subgraph reads from enclosing scopes (used but not defined inside it)."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    used: Set[str] = set()
    for node in graph.node:
        used.update(node_uses(node))
        defined.update(node.output)
    return used - defined


def node_uses(node: onnx.NodeProto) -> List[str]:
    """Every tensor a node reads: its inputs plus what its subgraphs read from outside."""
    uses = [name for name in node.input if name]
    for g in subgraphs(node):
        uses.extend(sorted(outer_references(g)))
    return uses


def producers(graph: onnx.GraphProto) -> Dict[str, onnx.NodeProto]:
    return {out: node for node in graph.node for out in node.output if out}


def consumers(graph: onnx.GraphProto) -> Dict[str, List[onnx.NodeProto]]:
    found: Dict[str, List[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in dict.fromkeys(node_uses(node)):
            found[name].append(node)
    return found


def replace_uses(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Make every reader of `old` read `new` instead (also inside subgraphs)."""
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
        for g in subgraphs(node):
            replace_uses(g, old, new)


def remove_value_info(graph: onnx.GraphProto, names: Iterable[str]) -> None:
    names = set(names)
    kept = [vi for vi in graph.value_info if vi.name not in names]
    if len(kept) != len(graph.value_info):
        del graph.value_info[:]
        graph.value_info.extend(kept)


def remove_initializers(graph: onnx.GraphProto, names: Iterable[str]) -> None:
    """Drops these initializers, their graph input entries (old models list initializers as
    inputs) and their value_info."""
    names = set(names)
    kept = [t for t in graph.initializer if t.name not in names]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    kept_inputs = [i for i in graph.input if i.name not in names]
    del graph.input[:]
    graph.input.extend(kept_inputs)
    remove_value_info(graph, names)


def remove_nodes(graph: onnx.GraphProto, doomed: Iterable[onnx.NodeProto]) -> None:
    # Deleting by index keeps the Python objects of the other nodes valid (callers may hold
    # them); protobuf returns the same wrapper object for an element on every access.
    doomed_ids = {id(n) for n in doomed}
    for i in reversed(range(len(graph.node))):
        if id(graph.node[i]) in doomed_ids:
            del graph.node[i]


def bypass_node(graph: onnx.GraphProto, node: onnx.NodeProto) -> bool:
    """Removes a node whose output equals its first input (a no-op), rewiring readers. Graph
    output names are anchors and must survive: then the input's producer is renamed instead,
    which is impossible when the input is itself a graph input, constant or output (returns
    False and leaves the node)."""
    src, dst = node.input[0], node.output[0]
    graph_outputs = {o.name for o in graph.output}
    if dst in graph_outputs:
        fixed = ({i.name for i in graph.input} | {t.name for t in graph.initializer} | graph_outputs)
        owner = producers(graph).get(src)
        if src in fixed or owner is None:
            return False
        replace_uses(graph, src, dst)
        for i, name in enumerate(owner.output):
            if name == src:
                owner.output[i] = dst
        remove_value_info(graph, [src])
    else:
        replace_uses(graph, dst, src)
        remove_value_info(graph, [dst])
    remove_nodes(graph, [node])
    return True


def set_float_attribute(node: onnx.NodeProto, name: str, value: float) -> None:
    """Sets (or adds) the float attribute `name` of `node`."""
    for attr in node.attribute:
        if attr.name == name:
            attr.f = value
            return
    node.attribute.append(onnx.helper.make_attribute(name, value))


def names_in_use(graph: onnx.GraphProto) -> Set[str]:
    """Initializer, graph input and node output names: what a new tensor must not be called."""
    return ({t.name for t in graph.initializer} | {i.name for i in graph.input}
            | {o for n in graph.node for o in n.output})


def fresh_name(name: str, taken: Set[str]) -> str:
    """`name`, or `name_1`, `name_2`... whichever is not in `taken`; the result joins `taken`."""
    candidate, i = name, 1
    while candidate in taken:
        candidate, i = f"{name}_{i}", i + 1
    taken.add(candidate)
    return candidate
