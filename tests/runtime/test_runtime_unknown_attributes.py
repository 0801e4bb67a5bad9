"""The runtime refuses a kernel step carrying an attribute its kernel does not read (docs/popef.md
"Kernel attributes"): a newer compiler's additive attribute may change the results, so a file
with one is refused at load, naming the file's step, op, node and attribute, rather than run
without it. Compiled executables (float32 and float16: the float16 adapter, fused and NCHWc
kernels) load as the compiler writes them, and refuse an extra attribute on any kernel step."""
import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import Compiler
from compiler.converter import Converter
from popef.format import BlobType
from popef.reader import PopefFile
from tests.integration.residual_blocks import resnet_blocks
from tests.runtime.popef_builders import with_edited_executable
from tf_popef_op import runtime

CONTROL_STEPS = ("Switch", "If", "Loop", "LoadTensorData")


def mlp_block(tokens=9, channels=16, seed=0):
    """LayerNorm -> MatMul + bias -> Relu -> MatMul -> + residual -> Softmax: LayerNormalization,
    two FusedMatMuls and a Softmax."""
    rng = np.random.default_rng(seed)
    inits = []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    nodes = [
        helper.make_node("LayerNormalization", ["X", const("g", rng.uniform(0.5, 1.5, channels)),
                                                const("b", np.zeros(channels))], ["ln"], axis=-1, epsilon=1e-6),
        helper.make_node("MatMul", ["ln", const("w1", rng.standard_normal((channels, 4 * channels)))], ["up"]),
        helper.make_node("Add", ["up", const("b1", rng.standard_normal(4 * channels))], ["up_b"]),
        helper.make_node("Relu", ["up_b"], ["act"]),
        helper.make_node("MatMul", ["act", const("w2", rng.standard_normal((4 * channels, channels)))], ["down"]),
        helper.make_node("Add", ["X", "down"], ["res"]),
        helper.make_node("Softmax", ["res"], ["Y"], axis=-1),
    ]
    shape = [1, tokens, channels]
    graph = helper.make_graph(nodes, "mlp_block", [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


MODELS = {
    "resnet_blocks-fp32": (lambda: resnet_blocks(1, wide=False), "fp32"),
    "resnet_blocks-fp16": (lambda: resnet_blocks(1, wide=False), "fp16"),
    "mlp_block-fp16": (mlp_block, "fp16"),
}


@pytest.fixture(scope="module", params=list(MODELS))
def executable(request):
    build, precision = MODELS[request.param]
    return Compiler.compile(Converter(precision=precision).convert(build()))


def _kernel_steps(doc):
    return [(i, s) for i, s in enumerate(doc["programs"]["main"]) if s["op"] not in CONTROL_STEPS]


def _executable_doc(executable):
    blob = next(b for b in PopefFile(executable.to_bytes()).blobs if b.type == BlobType.EXECUTABLE)
    return json.loads(bytes(blob.payload))


def _load_error(data):
    with pytest.raises(runtime.InvalidArgumentError) as info:
        runtime.ModelRunner(data)
    return str(info.value)


def test_the_compilers_attributes_are_all_read(executable):
    with runtime.ModelRunner(executable.to_bytes()):
        pass


def test_an_extra_attribute_on_any_kernel_step_is_refused(executable):
    steps = _kernel_steps(_executable_doc(executable))
    assert len(steps) >= 4, [s["op"] for _, s in steps]
    for index, step in steps:
        def add(doc, index=index):
            doc["programs"]["main"][index].setdefault("attrs", {})["future_attribute"] = 1
        message = _load_error(with_edited_executable(executable, add))
        assert message.startswith("<memory>: "), message  # names the file
        assert (f"program 'main' step #{index}: op '{step['op']}' (node '{step['name']}'): "
                "unknown attribute 'future_attribute'") in message, message
        assert "written by a newer compiler" in message, message


def test_alpha_is_refused_where_the_kernel_does_not_scale():
    """FusedMatMul reads `alpha` (a float16 layer scale's 2^-k): a step of another op carrying it
    is refused, where ignoring it would be off by that factor without a word."""
    executable = Compiler.compile(Converter(precision="fp16").convert(mlp_block()))
    steps = _kernel_steps(_executable_doc(executable))
    assert [s["op"] for _, s in steps] == ["LayerNormalization", "FusedMatMul", "FusedMatMul", "Softmax"], steps
    for index, step in steps:
        def add_alpha(doc, index=index):
            doc["programs"]["main"][index]["attrs"]["alpha"] = 2.0 ** -20
        data = with_edited_executable(executable, add_alpha)
        if step["op"] == "FusedMatMul":
            with runtime.ModelRunner(data):
                pass
        else:
            message = _load_error(data)
            assert f"step #{index}: op '{step['op']}' (node '{step['name']}'): unknown attribute 'alpha'" in message, \
                message


def test_every_unknown_attribute_is_named():
    executable = Compiler.compile(Converter(precision="fp32").convert(resnet_blocks(1, wide=False)))
    index, step = _kernel_steps(_executable_doc(executable))[0]

    def add_two(doc):
        attrs = doc["programs"]["main"][index].setdefault("attrs", {})
        attrs["zz_second"] = [1, 2]
        attrs["aa_first"] = "x"
    message = _load_error(with_edited_executable(executable, add_two))
    assert f"op '{step['op']}' (node '{step['name']}'): unknown attributes 'aa_first', 'zz_second'" in message, message
