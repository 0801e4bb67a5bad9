"""serving.client (GrpcClient, RestClient) and the popef-client CLI against a live server."""
import json

import grpc
import numpy as np
import pytest

from serving.client import GrpcClient, RestClient, RestError
from serving.client.cli import main as client_main
from serving_harness import ServerProcess
from serving_models import expected_affine, save_affine


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("client")
    save_affine(str(root / "models" / "m" / "1"))
    process = ServerProcess(root / "server", "--model_name=m",
                            f"--model_base_path={root / 'models' / 'm'}").start()
    process.target = f"127.0.0.1:{process.grpc_port}"
    process.base_url = f"http://127.0.0.1:{process.rest_port}"
    yield process
    assert process.stop() == 0, process.log()


def test_grpc_client(server):
    x = np.array([[1, 2]], np.float32)
    with GrpcClient(server.target) as client:
        np.testing.assert_array_equal(client.predict("m", {"x": x})["y"], expected_affine(x))
        outputs = client.predict("m", {"text": np.array([b"abc"], object),
                                       "numbers": np.ones([1, 3], np.int32)},
                                 signature="two_io", version=1, output_filter=["length"])
        assert list(outputs) == ["length"] and outputs["length"].tolist() == [3]
        assert set(client.metadata("m").signature_def) == {"serving_default", "two_io", "slow"}
        assert client.status("m").model_version_status[0].version == 1
        with pytest.raises(grpc.RpcError) as caught:
            client.predict("nope", {"x": x})
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_rest_client(server):
    client = RestClient(server.base_url)
    answer = client.predict("m", instances=[[1, 2]])
    np.testing.assert_allclose(answer["predictions"], expected_affine([[1, 2]]))
    assert client.predict("m", inputs={"x": [[0, 0]]}, version=1) == {"outputs": [[1.0, 1.0]]}
    assert client.status("m")["model_version_status"][0]["state"] == "AVAILABLE"
    assert "two_io" in client.metadata("m")["metadata"]["signature_def"]["signature_def"]
    with pytest.raises(RestError) as caught:
        client.predict("m", instances=[[1, 2, 3]])
    assert caught.value.status == 400 and "expects [-1,2]" in caught.value.message
    with pytest.raises(ValueError):
        client.predict("m")


def test_cli_predict_over_grpc_and_rest(server, capsys, tmp_path):
    batch = tmp_path / "x.npy"
    np.save(batch, np.array([[1, 1], [2, 2]], np.float32))
    assert client_main(["--grpc", server.target, "predict", "m", "--input", f"x=@{batch}"]) == 0
    assert json.loads(capsys.readouterr().out) == {"outputs": {"y": [[3.0, 3.0], [5.0, 5.0]]}}
    assert client_main(["--grpc", server.target, "predict", "m", "--signature", "two_io",
                        "--input", 'text=["hi"]', "--input", "numbers=[[1,2,3]]"]) == 0
    assert json.loads(capsys.readouterr().out)["outputs"]["echo_bytes"] == ["hi"]
    assert client_main(["--rest", server.base_url, "predict", "m", "--instances", "[[0, 1]]"]) == 0
    assert json.loads(capsys.readouterr().out) == {"predictions": [[1.0, 3.0]]}
    assert client_main(["--rest", server.base_url, "status", "m", "--version", "1"]) == 0
    assert "AVAILABLE" in capsys.readouterr().out
    assert client_main(["--grpc", server.target, "status", "m"]) == 0
    assert json.loads(capsys.readouterr().out)["model_version_status"][0]["state"] == "AVAILABLE"


def test_cli_errors(server, capsys):
    assert client_main(["--grpc", server.target, "predict", "nope", "--instances", "[[1,2]]"]) == 1
    assert "NOT_FOUND" in capsys.readouterr().err
    assert client_main(["--rest", server.base_url, "predict", "m", "--instances", "[[1]]"]) == 1
    assert "HTTP 400" in capsys.readouterr().err
    with pytest.raises(SystemExit) as caught:
        client_main(["--grpc", server.target, "predict", "m", "--input", "q=[1]"])
    assert "has no input 'q'" in str(caught.value)
