"""The Python layers import in the allowed directions only (docs/architecture.md, "Layers"): the
import-linter contracts of the repository's .importlinter hold, the same contracts report a
back-edge added to a small fixture tree laid out like the repository, and importing popef or
the server loads no compiler module (checked at run time, in fresh interpreters)."""
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTRACTS = os.path.join(REPO, ".importlinter")

# The fixture: every module the contracts name, importing along the allowed directions, the way
# the repository's modules do (module path -> its import lines).
LAYOUT = {
    "compiler/__init__.py": "from compiler.compiler import compile_model",
    "compiler/compiler.py": """
        from compiler.converter.pipeline import prepare_control_flow_body
        from compiler.frontends.model_loading import load_model
        from compiler.kernel_fusion.pipeline import run_kernel_fusions
        from compiler.lowering.lower_model import lower_model
        def compile_model(): pass
        """,
    "compiler/cli.py": "from compiler.compiler import compile_model\nfrom compiler.fusion.fuse import fuse",
    "compiler/fusion/__init__.py": "",
    "compiler/fusion/fuse.py": "from compiler.lowering.lower_graph import lower_graph\ndef fuse(): pass",
    "compiler/lowering/__init__.py": "",
    "compiler/lowering/lower_model.py": "from compiler.lowering.lower_graph import lower_graph\nimport popef.writer\n"
                                        "def lower_model(): pass",
    "compiler/lowering/lower_graph.py": "from compiler.lowering.control_flow import lower_control_flow\n"
                                        "from compiler.lowering_rules.registry import find_rule\ndef lower_graph(): pass",
    "compiler/lowering/control_flow.py": "from compiler.onnx_graph.subgraph_model import body_model\n"
                                         "def lower_control_flow(): pass",
    "compiler/kernel_fusion/__init__.py": "from compiler.kernel_fusion import passes",
    "compiler/kernel_fusion/passes/__init__.py": "from compiler.kernel_fusion.passes import fuse_epilogue",
    "compiler/kernel_fusion/passes/fuse_epilogue.py": "from compiler.converter.pass_registry import register\n"
                                                      "from compiler.onnx_graph.tensor_types import TensorType",
    "compiler/kernel_fusion/pipeline.py": "from compiler.converter.pipeline import run_passes\n"
                                          "def run_kernel_fusions(): pass",
    "compiler/converter/__init__.py": "from compiler.converter import passes",
    "compiler/converter/pass_registry.py": "def register(): pass",
    "compiler/converter/pipeline.py": "from compiler.converter.pass_registry import register\n"
                                      "from compiler.frontends.model_loading import load_model\n"
                                      "def run_passes(): pass\ndef prepare_control_flow_body(): pass",
    "compiler/converter/passes/__init__.py": "from compiler.converter.passes import final_check",
    "compiler/converter/passes/final_check.py": "from compiler.converter.pass_registry import register\n"
                                                "from compiler.lowering_rules.registry import find_rule",
    "compiler/lowering_rules/__init__.py": "from compiler.lowering_rules import conv",
    "compiler/lowering_rules/registry.py": "from compiler.onnx_graph.tensor_types import TensorType\n"
                                           "def find_rule(): pass",
    "compiler/lowering_rules/conv.py": "from compiler.lowering_rules.registry import find_rule",
    "compiler/frontends/__init__.py": "",
    "compiler/frontends/model_loading.py": "import onnx\ndef load_model(): pass",
    "compiler/onnx_graph/__init__.py": "",
    "compiler/onnx_graph/tensor_types.py": "import onnx\nclass TensorType: pass",
    "compiler/onnx_graph/subgraph_model.py": "from compiler.onnx_graph.tensor_types import TensorType\n"
                                             "def body_model(): pass",
    "popef/__init__.py": "",
    "popef/reader.py": "import numpy",
    "popef/writer.py": "import numpy",
    "serving/__init__.py": "",
    "serving/popef_signatures.py": "from popef.reader import numpy\nfrom tf_popef_op import runtime",
    "tf_popef_op/__init__.py": "def __getattr__(name):\n    from tf_popef_op import ops",
    "tf_popef_op/ops.py": "import tensorflow",
    "tf_popef_op/runtime/__init__.py": "from tf_popef_op.runtime._runtime import ModelRunner",
}

# Back-edges the repository once had (or could grow), each with the contract that must report it.
BACK_EDGES = {
    "final_check lowers the graph": (
        "compiler/converter/passes/final_check.py", "from compiler.lowering.lower_graph import lower_graph",
        "The compiler's stages import only the stages upstream of them",
        "compiler.converter.passes.final_check -> compiler.lowering.lower_graph"),
    "lowering prepares bodies with the converter": (
        "compiler/lowering/control_flow.py", "def prepare():\n    from compiler.converter.pipeline import run_passes",
        "The lowering receives its control-flow body preparation",
        "compiler.lowering.control_flow -> compiler.converter.pipeline"),
    "tensor types and body models import each other": (
        "compiler/onnx_graph/tensor_types.py", "from compiler.onnx_graph.subgraph_model import body_model",
        "No import cycles between the modules of a compiler package", ".tensor_types -> .subgraph_model"),
    "a registry imports its plug-ins": (
        "compiler/lowering_rules/registry.py", "from compiler.lowering_rules import conv",
        "No import cycles between the modules of a compiler package", ".registry -> .conv"),
    "serving reads PopEF through the compiler": (
        "serving/popef_signatures.py", "from compiler.onnx_graph.tensor_types import TensorType",
        "never the compiler", "serving.popef_signatures -> compiler.onnx_graph.tensor_types"),
    "popef imports onnx": (
        "popef/reader.py", "import onnx", "popef is a leaf", "popef.reader -> onnx"),
    "the runtime binding imports TensorFlow": (
        "tf_popef_op/runtime/__init__.py", "import tensorflow",
        "The runtime binding imports neither TensorFlow nor the compiler", "tf_popef_op.runtime -> tensorflow"),
}


def lint_imports(root: str) -> subprocess.CompletedProcess:
    """import-linter with the repository's contracts over the packages found under `root`."""
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code, CONTRACTS], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)


def write_fixture(root, extra_line=None):
    for path, text in LAYOUT.items():
        full = root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(textwrap.dedent(text).strip() + "\n")
    if extra_line:
        path, line = extra_line
        with open(root / path, "a") as f:
            f.write(line + "\n")


def test_the_repository_keeps_its_import_contracts():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_fixture_without_back_edges_keeps_the_contracts(tmp_path):
    write_fixture(tmp_path)
    result = lint_imports(str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("case", sorted(BACK_EDGES))
def test_a_back_edge_breaks_its_contract(tmp_path, case):
    path, line, contract, edge = BACK_EDGES[case]
    write_fixture(tmp_path, (path, line))
    result = lint_imports(str(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken and edge in broken, result.stdout


def _imported_after(statement: str):
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    env = dict(os.environ, PYTHONPATH=REPO)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def _roots(modules):
    return {m.split(".")[0] for m in modules}


def test_importing_popef_loads_neither_onnx_nor_the_compiler():
    roots = _roots(_imported_after("import popef, popef.format, popef.reader, popef.writer, popef.dump"))
    assert not roots & {"onnx", "compiler", "tensorflow", "serving", "tf_popef_op"}, sorted(roots)


def test_importing_the_server_loads_no_compiler_module():
    modules = _imported_after("import serving.export, serving.popef_signatures, serving.model_server.server, "
                              "serving.client.cli")
    assert "serving.model_server.server" in modules
    assert not [m for m in modules if m.split(".")[0] == "compiler"]


def test_importing_the_runtime_binding_loads_neither_tensorflow_nor_the_compiler():
    roots = _roots(_imported_after("import tf_popef_op.runtime"))
    assert "tf_popef_op" in roots
    assert not roots & {"tensorflow", "compiler", "onnx"}, sorted(roots)
