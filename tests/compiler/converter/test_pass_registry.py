import pytest
from onnx import helper

from compiler.converter import DEFAULT_PIPELINE, Converter, get_pass, list_all_passes, register
from compiler.converter import pass_registry
from compiler.converter.pipeline import OPT_IN_PASSES, resolve_pipeline
from compiler.errors import UnknownPassError
from compiler.kernel_fusion import KERNEL_FUSION_PIPELINE
from compiler_test_helpers import F32, make_model, op_types, run_pass


def test_every_default_pass_is_registered_with_a_description():
    registered = {p.name: p for p in list_all_passes()}
    for name in DEFAULT_PIPELINE:
        assert name in registered
    for p in registered.values():
        assert p.description and p.kind in pass_registry.KINDS, p


def test_list_is_sorted_and_complete():
    names = [p.name for p in list_all_passes()]
    assert names == sorted(names)
    # Every pass runs in the converter's pipeline or in the compile step's kernel fusions, or is
    # one of the converter's opt-in passes.
    assert set(names) == set(DEFAULT_PIPELINE) | set(KERNEL_FUSION_PIPELINE) | set(OPT_IN_PASSES)
    assert not set(OPT_IN_PASSES) & set(DEFAULT_PIPELINE)


def test_unknown_pass_name_lists_known_ones():
    with pytest.raises(UnknownPassError) as e:
        get_pass("constant_foldin")
    assert "unknown pass 'constant_foldin'" in str(e.value)
    assert "constant_folding" in str(e.value) and "sort_graph" in str(e.value)


def test_unknown_names_in_used_or_skipped_passes():
    with pytest.raises(UnknownPassError, match="unknown pass 'nope'"):
        resolve_pipeline(used_passes=["sort_graph", "nope"])
    with pytest.raises(UnknownPassError, match="unknown pass 'nada'"):
        resolve_pipeline(skip_passes=["nada"])
    with pytest.raises(UnknownPassError):
        Converter(used_passes=["bogus"])


def test_used_passes_run_only_those_in_the_given_order():
    assert resolve_pipeline(["sort_graph", "eliminate_identity"]) == ["sort_graph", "eliminate_identity"]
    model = make_model([helper.make_node("Identity", ["X"], ["T"]), helper.make_node("Relu", ["T"], ["Y"])],
                       [("X", F32, [2])], [("Y", F32, [2])])
    conv = Converter(used_passes=["eliminate_identity", "sort_graph"])
    out = conv.convert(model)
    assert conv.passes_run == ["eliminate_identity", "sort_graph"]
    assert op_types(out) == ["Relu"]


def test_skip_passes_removes_them_from_the_default_pipeline():
    model = make_model([helper.make_node("Identity", ["X"], ["T"]), helper.make_node("Relu", ["T"], ["Y"])],
                       [("X", F32, [2])], [("Y", F32, [2])])
    conv = Converter(skip_passes=["eliminate_identity"])
    out = conv.convert(model)
    assert "eliminate_identity" not in conv.passes_run
    assert conv.passes_run == [n for n in DEFAULT_PIPELINE if n != "eliminate_identity"]
    assert op_types(out) == ["Identity", "Relu"]


@pytest.mark.parametrize("name", [p.name for p in list_all_passes()])
def test_each_registered_pass_runs_on_an_empty_graph(name):
    model = make_model([], [], [])
    out = run_pass(model, name, precision="fp16", batch_size=2, max_tensor_size=16)
    assert len(out.graph.node) == 0 and len(out.graph.output) == 0


def test_registering_twice_or_with_a_bad_kind_fails():
    with pytest.raises(ValueError, match="registered twice"):
        register("sort_graph", kind="order")(lambda m, c: m)
    with pytest.raises(ValueError, match="kind must be one of"):
        register("x_bad_kind", kind="magic")


def test_non_idempotent_pass_is_repeated_until_the_graph_stops_changing():
    calls = []

    @register("test_remove_one_identity", kind="eliminate", idempotent=False)
    def remove_one(model, ctx):
        """Test pass: removes the first Identity only."""
        calls.append(1)
        from compiler.onnx_graph.graph_edit import bypass_node
        for node in model.graph.node:
            if node.op_type == "Identity":
                bypass_node(model.graph, node)
                break
        return model

    try:
        nodes = [helper.make_node("Identity", ["X"], ["A"]), helper.make_node("Identity", ["A"], ["B"]),
                 helper.make_node("Identity", ["B"], ["C"]), helper.make_node("Relu", ["C"], ["Y"])]
        model = make_model(nodes, [("X", F32, [2])], [("Y", F32, [2])])
        out = run_pass(model, "test_remove_one_identity")
        assert op_types(out) == ["Relu"] and out.graph.node[0].input[0] == "X"
        assert len(calls) == 4  # three removals, then one run that changes nothing
    finally:
        del pass_registry._PASSES["test_remove_one_identity"]


def test_a_class_can_be_registered_and_its_instance_runs():
    @register("test_class_pass", kind="eliminate")
    class CountNodes:
        """Test pass: records how many nodes it saw."""
        seen = []

        def __call__(self, model, ctx):
            self.seen.append(len(model.graph.node))
            return model

    try:
        info = get_pass("test_class_pass")
        assert info.description == "Test pass: records how many nodes it saw." and info.idempotent
        model = make_model([helper.make_node("Relu", ["X"], ["Y"])], [("X", F32, [2])], [("Y", F32, [2])])
        run_pass(model, "test_class_pass")
        assert CountNodes.seen == [1]
    finally:
        del pass_registry._PASSES["test_class_pass"]
