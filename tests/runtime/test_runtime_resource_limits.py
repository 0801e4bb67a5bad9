"""Limits a hostile PopEF cannot exceed: sizes declared beyond the file, device memory needs
beyond the device, anchors larger than the device and batch sizes no shape backs are refused
when the runner is built, before anything is allocated for them."""
import struct

import numpy as np
import pytest

from popef.format import HEADER_SIZE, crc32
from popef_builders import add_model, weight_model
from tf_popef_op import runtime


def test_blob_declaring_more_bytes_than_the_file_is_refused():
    data = bytearray(add_model().to_bytes())
    struct.pack_into("<QQ", data, 32, 1 << 61, 1 << 62)  # payload_size, total_size of blob #0
    struct.pack_into("<I", data, 60, crc32(bytes(data[:60]), bytes(data[HEADER_SIZE:HEADER_SIZE + 8])))
    with pytest.raises(runtime.DataLossError, match=r"needs 4611686018427387904 bytes at offset 0 but the file has"):
        runtime.ModelRunner(bytes(data))


def test_weights_and_arena_beyond_the_device_are_refused():
    model = weight_model(np.ones((4, 2), np.float32), arena_bytes=1 << 40)
    model.metadata["device_memory"].update(arena_bytes=1 << 40)
    with pytest.raises(runtime.FailedPreconditionError, match=r"needs 1099511627840 bytes of device memory "
                                                              r"\(weights 64 \+ arena 1099511627776\) but device \d+"):
        runtime.ModelRunner(model)


def test_anchor_larger_than_the_device_is_refused():
    shape = [1 << 20, 1 << 20]
    model = add_model(shape=shape)
    with pytest.raises(runtime.FailedPreconditionError,
                       match=r"input anchor 'X' \(float32 \[1048576, 1048576\]\) needs 4398046511104 bytes but"):
        runtime.ModelRunner(model)


def test_subgraph_batch_size_that_disagrees_with_the_anchor_shapes_is_refused():
    model = add_model(shape=(4, 2))
    model.executable["subgraphs"][0]["batch_size"] = 1 << 31
    with pytest.raises(runtime.InvalidArgumentError,
                       match=r"Executable.subgraphs\[0\].batch_size: 2147483648 on batch_axis 0 disagrees with "
                             r"anchor 'X' \[4, 2\] \(batch axis 0\)"):
        runtime.ModelRunner(model)


def test_declared_batch_size_without_batched_anchors_sizes_no_queue():
    model = add_model(shape=(4, 2), batch_axis=-1)
    model.executable["subgraphs"][0]["batch_size"] = 1 << 40
    x = np.ones((4, 2), np.float32)
    with runtime.ModelRunner(model) as runner:
        np.testing.assert_array_equal(runner.execute({"X": x, "Y": x})["O"], x + x)
