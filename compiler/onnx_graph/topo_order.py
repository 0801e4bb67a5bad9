"""Stable topological order of a graph's nodes (Kahn's algorithm, ties broken by the original
position so an already sorted graph keeps its order)."""
import heapq
from typing import List

import onnx

from compiler.errors import ConversionError
from compiler.onnx_graph.graph_edit import node_uses


def node_label(node: onnx.NodeProto, index: int) -> str:
    return f"'{node.name}' ({node.op_type})" if node.name else f"#{index} ({node.op_type})"


def topological_order(graph: onnx.GraphProto, model_name: str = "<model>") -> List[int]:
    """Indices of graph.node in dependency order. Raises ConversionError naming the node for a
    read of an undefined tensor or for a cycle."""
    nodes = list(graph.node)
    available = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    producer = {}
    for idx, node in enumerate(nodes):
        for out in node.output:
            if not out:
                continue
            if out in producer or out in available:
                raise ConversionError(f"{model_name}: tensor '{out}' is defined twice (output of node "
                                      f"{node_label(node, idx)}); ONNX graphs are single-assignment")
            producer[out] = idx
    waiting = [0] * len(nodes)
    readers: List[List[int]] = [[] for _ in nodes]
    for idx, node in enumerate(nodes):
        deps = set()
        for name in node_uses(node):
            if name in available:
                continue
            if name not in producer:
                raise ConversionError(f"{model_name}: node {node_label(node, idx)} reads tensor '{name}', which "
                                      f"is not a graph input, an initializer or the output of any node")
            deps.add(producer[name])
        waiting[idx] = len(deps)
        for d in deps:
            readers[d].append(idx)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        idx = heapq.heappop(ready)
        order.append(idx)
        for r in readers[idx]:
            waiting[r] -= 1
            if waiting[r] == 0:
                heapq.heappush(ready, r)
    if len(order) != len(nodes):
        stuck = [node_label(nodes[i], i) for i, w in enumerate(waiting) if w > 0]
        raise ConversionError(f"{model_name}: the graph has a cycle through nodes {', '.join(stuck[:8])}"
                              + (" ..." if len(stuck) > 8 else ""))
    return order
