from onnx import AttributeProto, helper

from compiler.converter.pass_registry import register
from compiler.converter.passes.eliminate_nop_transpose import transpose_perm
from compiler.onnx_graph.graph_edit import producers
from compiler.onnx_graph.type_inference import infer_types


@register("fuse_consecutive_transposes", kind="fuse")
def fuse_consecutive_transposes(model, ctx):
    """Merge Transpose(Transpose(x, p1), p2) into one Transpose(x, p1[p2])."""
    graph = model.graph
    transposes = [n for n in graph.node if n.op_type == "Transpose" and n.domain in ("", "ai.onnx")]
    if len(transposes) < 2:
        return model
    types = infer_types(model, model_name=ctx.model_name)

    def perm_of(node):
        t = types.get(node.input[0])
        return transpose_perm(node, None if t is None or t.shape is None else len(t.shape))

    made = producers(graph)
    # Nodes are visited producer first (the graph may be unsorted, so follow producers), which
    # folds chains of any length into the last Transpose.
    done = set()

    def fuse(node):
        if id(node) in done:
            return
        done.add(id(node))
        first = made.get(node.input[0])
        if first is None or first.op_type != "Transpose" or first.domain not in ("", "ai.onnx"):
            return
        fuse(first)
        p1, p2 = perm_of(first), perm_of(node)
        if p1 is None or p2 is None or len(p1) != len(p2):
            return
        # out[i] = mid[p2[i]] = x[p1[p2[i]]]; the first Transpose stays if others read it (DCE
        # removes it otherwise).
        node.input[0] = first.input[0]
        node.ClearField("attribute")
        # The type is given: a scalar's perm is empty, and an empty list has no type to infer.
        node.attribute.append(helper.make_attribute("perm", [p1[j] for j in p2], attr_type=AttributeProto.INTS))

    for node in transposes:
        fuse(node)
    return model
