"""benchmarks/peer_verdict.py: a latency cell is judged against the best peer figure of either
timing mode, each side taking its better median, and held to the target of its model family."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))

from peer_verdict import FAMILY_TARGET, TUNED_TARGET, best_peer_ratio, meets, target  # noqa: E402


def test_the_best_peer_is_the_fastest_of_every_peer_in_every_mode():
    v = best_peer_ratio({"interleaved": 10.0, "blocks": 9.0},
                        {"interleaved": {"onnxruntime fp32": 11.0, "OpenVINO fp32": 10.5},
                         "blocks": {"onnxruntime fp32": 9.5, "OpenVINO fp32": 12.0}})
    assert (v["peer"], v["peer_mode"], v["peer_ms"]) == ("onnxruntime fp32", "blocks", 9.5)
    assert (v["ours_mode"], v["ours_ms"]) == ("blocks", 9.0)
    assert v["ratio"] == pytest.approx(9.0 / 9.5)
    assert v["by_mode"] == pytest.approx({"interleaved": 10.0 / 10.5, "blocks": 9.0 / 9.5})


def test_a_peer_that_did_not_run_is_left_out_and_none_at_all_is_an_error():
    v = best_peer_ratio({"interleaved": 4.0}, {"interleaved": {"onnxruntime fp32": 2.0}})
    assert v["ratio"] == pytest.approx(2.0) and v["by_mode"] == {"interleaved": pytest.approx(2.0)}
    with pytest.raises(ValueError, match="no peer figure"):
        best_peer_ratio({"interleaved": 4.0}, {"interleaved": {}})


def test_targets_by_family_and_precision():
    assert target("resnet50", "fp32") == target("bert_encoder", "fp16") == TUNED_TARGET
    assert target("efficientnet_b0", "fp32") == FAMILY_TARGET
    assert target("densenet121", "fp16") is None
    assert meets(0.89, TUNED_TARGET) is True and meets(0.91, TUNED_TARGET) is False
    assert meets(3.0, None) is None
