"""serving/protos/build_protos.py: vendored .proto files compile into importable modules
whose imports point inside the generated package (flat Triton-style and path-style imports),
with TensorFlow's own protos taken from the modules TensorFlow ships."""
import importlib
import subprocess
import sys
import textwrap

import pytest

from serving.protos import build_protos


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture()
def generated(tmp_path):
    protos = tmp_path / "proto"
    # Flat layout with a service (as Triton's grpc_service.proto / model_config.proto).
    _write(protos / "flat" / "bp_types.proto", """
        syntax = "proto3";
        package buildprotostest.flat;
        import "tensorflow/core/framework/types.proto";
        message Shape { repeated int64 dims = 1; tensorflow.DataType dtype = 2; }
        """)
    _write(protos / "flat" / "bp_service.proto", """
        syntax = "proto3";
        package buildprotostest.flat;
        import "bp_types.proto";
        import "google/protobuf/wrappers.proto";
        message Request { Shape shape = 1; google.protobuf.Int64Value limit = 2; }
        service Echo { rpc Call(Request) returns (Request) {} }
        """)
    # Upstream-path layout (as tensorflow_serving/config/...).
    _write(protos / "nested" / "bp" / "config" / "inner.proto", """
        syntax = "proto3";
        package buildprotostest.nested;
        message Inner { string name = 1; }
        """)
    _write(protos / "nested" / "bp" / "config" / "outer.proto", """
        syntax = "proto3";
        package buildprotostest.nested;
        import "bp/config/inner.proto";
        message Outer { Inner inner = 1; }
        """)
    out = tmp_path / "pkg" / "bp_generated"
    out.mkdir(parents=True)
    (out / "__init__.py").write_text("")
    written = build_protos.build(out_dir=out, proto_dir=protos, package="bp_generated")
    return tmp_path / "pkg", written


def test_generated_modules_import_each_other_inside_the_package(generated):
    root, written = generated
    names = sorted(p.relative_to(root).as_posix() for p in written)
    assert names == ["bp_generated/flat/bp_service_pb2.py", "bp_generated/flat/bp_service_pb2_grpc.py",
                     "bp_generated/flat/bp_types_pb2.py", "bp_generated/nested/bp/config/inner_pb2.py",
                     "bp_generated/nested/bp/config/outer_pb2.py"]
    service = (root / "bp_generated/flat/bp_service_pb2.py").read_text()
    assert "from bp_generated.flat import bp_types_pb2" in service
    assert "from google.protobuf import wrappers_pb2" in service
    types = (root / "bp_generated/flat/bp_types_pb2.py").read_text()
    assert "from tensorflow.core.framework import types_pb2" in types
    outer = (root / "bp_generated/nested/bp/config/outer_pb2.py").read_text()
    assert "from bp_generated.nested.bp.config import inner_pb2" in outer
    # Imported in a fresh interpreter: the messages work across files.
    code = ("from bp_generated.flat import bp_service_pb2, bp_service_pb2_grpc\n"
            "from bp_generated.nested.bp.config import outer_pb2\n"
            "r = bp_service_pb2.Request(); r.shape.dims.append(3); r.shape.dtype = 1; r.limit.value = 5\n"
            "o = outer_pb2.Outer(); o.inner.name = 'x'\n"
            "assert bp_service_pb2_grpc.EchoStub\n"
            "back = bp_service_pb2.Request.FromString(r.SerializeToString())\n"
            "print(list(back.shape.dims), back.shape.dtype, back.limit.value, o.inner.name)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[3]", "1", "5", "x"]


def test_unknown_import_is_named(tmp_path):
    _write(tmp_path / "proto" / "o" / "bad.proto", """
        syntax = "proto3";
        import "no/such/dependency.proto";
        message Bad { int32 x = 1; }
        """)
    with pytest.raises(RuntimeError, match=r"no/such/dependency\.proto .*no\.such\.dependency_pb2"):
        build_protos.build(out_dir=tmp_path / "out", proto_dir=tmp_path / "proto", package="out")


def test_vendored_server_configs_are_built():
    ssl = importlib.import_module(
        "serving.protos.tensorflow_serving.tensorflow_serving.config.ssl_config_pb2")
    assert [f.name for f in ssl.SSLConfig.DESCRIPTOR.fields] == [
        "server_key", "server_cert", "custom_ca", "client_verify"]
