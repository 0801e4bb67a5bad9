"""The C++ PopEF reader (through ModelRunner): every malformed file raises the right exception,
naming the file and the reason, with the same message as popef/reader.py."""
import os
import pathlib
import random
import struct

import numpy as np
import pytest

from popef.format import BlobType, PopefError
from popef.reader import PopefFile
from popef.writer import encode_popef
from popef_builders import add_model, weight_model
from tf_popef_op import runtime


@pytest.fixture
def good_bytes():
    return add_model().to_bytes()


def _python_reader_message(data: bytes, source: str) -> str:
    with pytest.raises(PopefError) as info:
        PopefFile(data, source)
    return str(info.value)


def _patch(data: bytes, offset: int, fmt: str, value) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.popef"
    with pytest.raises(runtime.NotFoundError) as info:
        runtime.ModelRunner(path)
    assert str(info.value) == f"{path}: PopEF file not found"
    assert info.value.code == "NOT_FOUND"
    assert isinstance(info.value, FileNotFoundError)


def test_directory_is_rejected(tmp_path):
    with pytest.raises(runtime.InvalidArgumentError, match="is a directory"):
        runtime.ModelRunner(str(tmp_path))


def test_empty_file(tmp_path):
    path = tmp_path / "empty.popef"
    path.write_bytes(b"")
    with pytest.raises(runtime.DataLossError) as info:
        runtime.ModelRunner(str(path))
    assert str(info.value) == f"{path}: empty file"
    assert str(info.value) == _python_reader_message(b"", str(path))


def test_bad_magic(tmp_path, good_bytes):
    path = tmp_path / "bad.popef"
    path.write_bytes(b"NOTPOPEF" + good_bytes[8:])
    with pytest.raises(runtime.InvalidArgumentError) as info:
        runtime.ModelRunner(path)
    assert str(info.value) == f"{path}: not a PopEF file (bad magic at offset 0)"


def test_bad_major_version(tmp_path, good_bytes):
    path = tmp_path / "v2.popef"
    path.write_bytes(_patch(good_bytes, 8, "<H", 2))
    with pytest.raises(runtime.InvalidArgumentError) as info:
        runtime.ModelRunner(path)
    assert str(info.value) == f"{path}: unsupported PopEF major version 2 (this reader supports 1)"


def test_higher_minor_version_is_accepted(good_bytes):
    # Minor versions are additive: only the header checksum has to be recomputed.
    from popef.format import crc32
    data = bytearray(_patch(good_bytes, 10, "<H", 7))
    name_size = struct.unpack_from("<I", data, 16)[0]
    struct.pack_into("<I", data, 60, crc32(bytes(data[:60]), bytes(data[64:64 + name_size])))
    with runtime.ModelRunner(bytes(data)) as runner:
        x = np.ones((4, 2), np.float32)
        np.testing.assert_array_equal(runner.execute({"X": x, "Y": x})["O"], x + x)


def test_truncated_file(tmp_path, good_bytes):
    path = tmp_path / "cut.popef"
    cut = good_bytes[:len(good_bytes) - 100]
    path.write_bytes(cut)
    with pytest.raises(runtime.DataLossError) as info:
        runtime.ModelRunner(path)
    message = str(info.value)
    assert message.startswith(f"{path}: truncated: blob #")
    assert f"but the file has {len(cut)} bytes" in message
    assert message == _python_reader_message(cut, str(path))


def test_truncated_header(good_bytes):
    cut = good_bytes[:40]
    with pytest.raises(runtime.DataLossError) as info:
        runtime.ModelRunner(cut)
    assert str(info.value) == ("<memory>: truncated: blob #0 header needs 64 bytes at offset 0 "
                               "but the file has 40 bytes")


def test_corrupted_payload(tmp_path, good_bytes):
    payload_offset = struct.unpack_from("<Q", good_bytes, 24)[0]
    data = bytearray(good_bytes)
    data[payload_offset + 3] ^= 0x20
    path = tmp_path / "corrupt.popef"
    path.write_bytes(bytes(data))
    with pytest.raises(runtime.DataLossError) as info:
        runtime.ModelRunner(path)
    assert str(info.value) == (f"{path}: corrupted: payload checksum mismatch in blob #0 "
                               f"(Metadata 'metadata')")
    assert str(info.value) == _python_reader_message(bytes(data), str(path))


def test_corrupted_header(good_bytes):
    data = bytearray(good_bytes)
    data[64] ^= 0x01  # first byte of the name is covered by the header checksum
    with pytest.raises(runtime.DataLossError, match=r"corrupted: header checksum mismatch in blob #0") as info:
        runtime.ModelRunner(bytes(data))
    assert str(info.value) == _python_reader_message(bytes(data), "<memory>")


def test_unknown_blob_type(good_bytes):
    from popef.format import crc32
    data = bytearray(_patch(good_bytes, 12, "<H", 9))
    name_size = struct.unpack_from("<I", data, 16)[0]
    struct.pack_into("<I", data, 60, crc32(bytes(data[:60]), bytes(data[64:64 + name_size])))
    with pytest.raises(runtime.InvalidArgumentError) as info:
        runtime.ModelRunner(bytes(data))
    assert str(info.value) == "<memory>: blob #0 'metadata' has unknown blob type 9"
    assert str(info.value) == _python_reader_message(bytes(data), "<memory>")


@pytest.mark.parametrize("blob_type", [BlobType.TENSOR_DATA, BlobType.OPAQUE])
def test_two_tensor_data_or_opaque_blobs_with_one_name(blob_type):
    model = weight_model(np.ones((4, 2), np.float32))
    blobs = model.blobs() + [(blob_type, "W" if blob_type == BlobType.TENSOR_DATA else "compiler", b"\0" * 32)]
    data = encode_popef(blobs)
    with pytest.raises(runtime.InvalidArgumentError) as info:
        runtime.ModelRunner(data)
    first = [i for i, b in enumerate(blobs) if b[0] == blob_type][0]
    assert str(info.value) == (f"<memory>: blob #{len(blobs) - 1} ({blob_type.label} '{blobs[-1][1]}') has the same "
                               f"name as blob #{first}")
    assert str(info.value) == _python_reader_message(data, "<memory>")


def test_inconsistent_sizes(good_bytes):
    from popef.format import crc32
    data = bytearray(_patch(good_bytes, 32, "<Q", 2 ** 63))  # payload_size far past total_size
    name_size = struct.unpack_from("<I", data, 16)[0]
    struct.pack_into("<I", data, 60, crc32(bytes(data[:60]), bytes(data[64:64 + name_size])))
    with pytest.raises(runtime.DataLossError) as info:
        runtime.ModelRunner(bytes(data))
    assert str(info.value) == "<memory>: corrupted: inconsistent sizes in blob #0 (Metadata 'metadata')"
    assert str(info.value) == _python_reader_message(bytes(data), "<memory>")


def test_missing_executable_blob():
    model = add_model()
    blobs = [b for b in model.blobs() if b[1] != "executable"]
    from popef.writer import encode_popef
    with pytest.raises(runtime.InvalidArgumentError,
                       match=r"^<memory>: expected exactly one Executable blob, found 0$"):
        runtime.ModelRunner(encode_popef(blobs))


def test_invalid_metadata_json():
    from popef.format import BlobType
    from popef.writer import encode_popef
    blobs = [(BlobType.METADATA, "metadata", b"{not json"),
             *[b for b in add_model().blobs() if b[0] != BlobType.METADATA]]
    with pytest.raises(runtime.InvalidArgumentError, match=r"Metadata blob 'metadata' is not valid JSON"):
        runtime.ModelRunner(encode_popef(blobs))


def test_fuzzed_files_never_crash():
    """Random bit flips, truncations and garbage: always a runtime.Error (or success), never a
    crash or hang. Runs in-process, so a crash fails the whole test run."""
    rng = random.Random(1234)
    base = weight_model(np.arange(8, dtype=np.float32).reshape(4, 2)).to_bytes()
    outcomes = {"ok": 0, "error": 0}
    for i in range(600):
        data = bytearray(base)
        mode = i % 4
        if mode == 0:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif mode == 1:
            data = data[:rng.randrange(len(data))]
        elif mode == 2:
            # Corrupt a header field (sizes/offsets) and keep checksums honest, so the
            # bounds checks, not the CRCs, must catch it.
            from popef.format import crc32
            field = rng.choice([16, 24, 32, 40])
            fmt = "<I" if field == 16 else "<Q"
            value = rng.choice([0, 1, 63, 64, 2 ** 31, 2 ** 32 - 1, 2 ** 63, 2 ** 64 - 1])
            if fmt == "<I":
                value &= 0xFFFFFFFF
            struct.pack_into(fmt, data, field, value)
            name_size = struct.unpack_from("<I", data, 16)[0]
            if 64 + name_size <= len(data):
                struct.pack_into("<I", data, 60, crc32(bytes(data[:60]), bytes(data[64:64 + name_size])))
        else:
            data = bytearray(rng.randbytes(rng.randrange(1, 512)))
        try:
            with runtime.ModelRunner(bytes(data)) as runner:
                runner.execute({"X": np.ones((4, 2), np.float32)})
            outcomes["ok"] += 1
        except runtime.Error:
            outcomes["error"] += 1
    assert outcomes["error"] > 500


@pytest.mark.parametrize("kind", ["str", "pathlike", "bytes", "bytearray", "memoryview", "to_bytes"])
def test_accepted_popef_sources(tmp_path, kind):
    model = add_model()
    path = tmp_path / "add.popef"
    model.write(path)
    source = {"str": str(path), "pathlike": pathlib.Path(path), "bytes": model.to_bytes(),
              "bytearray": bytearray(model.to_bytes()), "memoryview": memoryview(model.to_bytes()),
              "to_bytes": model}[kind]
    with runtime.ModelRunner(source) as runner:
        x = np.arange(8, dtype=np.float32).reshape(4, 2)
        np.testing.assert_array_equal(runner.execute({"X": x, "Y": x})["O"], 2 * x)


def test_rejects_other_popef_types():
    with pytest.raises(TypeError, match="popef must be a path"):
        runtime.ModelRunner(42)


def test_file_is_mapped_not_copied_and_can_be_removed(tmp_path):
    # The runner keeps its mapping; deleting the file afterwards does not affect it.
    path = tmp_path / "w.popef"
    w = np.arange(8, dtype=np.float32).reshape(4, 2)
    weight_model(w).write(path)
    with runtime.ModelRunner(path) as runner:
        os.remove(path)
        x = np.full((4, 2), 2, np.float32)
        np.testing.assert_array_equal(runner.execute({"X": x})["O"], (x + w) * x)
