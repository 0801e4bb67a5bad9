"""decompose_einsum: Einsum rewritten as ReduceSum/Transpose/Reshape/MatMul, checked against
onnxruntime running the original Einsum, then compiled and run on the emulator; unsupported
forms raise errors naming the node."""
import numpy as np
import pytest
from onnx import helper

from compiler import Compiler
from compiler.errors import ConversionError
from tests.compiler.compiler_test_helpers import F32, make_model, op_types, ort_run, random_feeds, run_pass
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

CASES = [
    ("bqhd,bkhd->bhqk", [(2, 5, 3, 4), (2, 6, 3, 4)]),   # attention scores
    ("bhqk,bkhd->bqhd", [(2, 3, 5, 6), (2, 6, 3, 4)]),   # attention context
    ("abc,cd->abd", [(2, 3, 4), (4, 5)]),                 # dense on the last axis
    ("abc,cde->abde", [(2, 3, 4), (4, 2, 3)]),           # projection to heads
    ("abcd,cde->abe", [(2, 3, 4, 5), (4, 5, 6)]),        # output projection from heads
    ("ij,ij->i", [(3, 4), (3, 4)]),                       # row-wise dot
    ("i,j->ij", [(3,), (4,)]),                            # outer product
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),               # batched matmul
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("abc,b->ac", [(2, 3, 4), (3,)]),                     # contraction over a middle axis
    ("ijk->kji", [(2, 3, 4)]),
    ("ijk->ik", [(2, 3, 4)]),
    ("aij,k->aik", [(2, 3, 4), (5,)]),                    # j summed in A only
]


def einsum_model(equation, shapes, opset=13):
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], equation=equation, name="es")
    return make_model([node], [(n, F32, list(s)) for n, s in zip(names, shapes)], [("y", F32, None)], opset=opset)


@pytest.mark.parametrize("equation,shapes", CASES)
def test_decomposition_matches_onnxruntime_and_runs_on_the_emulator(equation, shapes):
    model = einsum_model(equation, shapes)
    feeds = random_feeds(model)
    want = ort_run(model, feeds)[0]
    rewritten = run_pass(model, ["decompose_einsum"])
    assert "Einsum" not in op_types(rewritten)
    np.testing.assert_allclose(ort_run(rewritten, feeds)[0], want, rtol=1e-5, atol=1e-5)
    got = ModelRunner(Compiler.compile(model), RuntimeConfig()).execute(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_opset_12_reduce_sum_uses_the_axes_attribute():
    model = einsum_model("ijk->ik", [(2, 3, 4)], opset=12)
    feeds = random_feeds(model)
    rewritten = run_pass(model, ["decompose_einsum"])
    np.testing.assert_allclose(ort_run(rewritten, feeds)[0], ort_run(model, feeds)[0], rtol=1e-6)


@pytest.mark.parametrize("equation,shapes,message", [
    ("ii->i", [(3, 3)], "repeats a letter"),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], "3 operands is not supported"),
    ("bij,bjk->bik", [(1, 3, 4), (2, 4, 5)], "broadcasting inside Einsum is not supported"),
])
def test_unsupported_forms_name_the_node(equation, shapes, message):
    with pytest.raises(ConversionError, match=rf"node 'es' \(Einsum\).*{message}"):
        run_pass(einsum_model(equation, shapes), ["decompose_einsum"])
