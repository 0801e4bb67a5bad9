"""Round trip and corruption cases of popef (writer + Python reader), with the exact
messages of docs/popef.md §1."""
import json
import struct

import numpy as np
import pytest

from compiler.executable import Executable
from popef.format import HEADER_SIZE, BlobType, PopefError, crc32
from popef.reader import PopefFile
from popef.writer import encode_popef, json_payload, write_popef

W = np.arange(25, dtype=np.float32).reshape(5, 5)
METADATA = {"ipu_version": "ipu2", "anchors": [],
            "tensor_data": [{"name": "W", "dtype": "float32", "shape": [5, 5], "nbytes": 100}]}


def _blobs():
    return [(BlobType.METADATA, "metadata", json_payload(METADATA)),
            (BlobType.EXECUTABLE, "executable", json_payload({"version": 1})),
            (BlobType.TENSOR_DATA, "W", W.tobytes()),
            (BlobType.OPAQUE, "compiler", json_payload({"passes": ["sort_graph"]}))]


@pytest.fixture
def popef_path(tmp_path):
    path = tmp_path / "model.popef"
    write_popef(str(path), _blobs())
    return path


def _write(path, data):
    path.write_bytes(bytes(data))
    return str(path)


def _open_error(path):
    with pytest.raises(PopefError) as e:
        PopefFile.open(path)
    return str(e.value)


def _offsets(data):
    """(header offset, payload offset, total size) of every blob."""
    out, offset = [], 0
    while offset < len(data):
        fields = struct.unpack_from("<8sHHHHIIQQQ12sI", data, offset)
        out.append((offset, offset + fields[7], fields[9]))
        offset += fields[9]
    return out


def test_round_trip(popef_path):
    popef = PopefFile.open(str(popef_path))
    assert [(b.type, b.name) for b in popef.blobs] == [(t, n) for t, n, _ in _blobs()]
    assert all(b.payload_offset % 64 == 0 and b.offset % 64 == 0 for b in popef.blobs)
    assert popef.metadata == METADATA and popef.executable == {"version": 1}
    np.testing.assert_array_equal(popef.tensor_data()["W"], W)
    assert popef.opaque_json("compiler") == {"passes": ["sort_graph"]}
    assert len(popef.data) % 64 == 0


@pytest.mark.parametrize("where", ["inside_first_header", "inside_first_name", "inside_first_payload",
                                   "inside_second_header", "last_byte"])
def test_truncation(popef_path, tmp_path, where):
    data = popef_path.read_bytes()
    blobs = _offsets(data)
    cut, expected = {
        "inside_first_header": (30, "truncated: blob #0 header needs 64 bytes at offset 0 but the file has 30 bytes"),
        "inside_first_name": (HEADER_SIZE + 3, "truncated: blob #0 name needs 8 bytes at offset 64 but the file has 67 bytes"),
        "inside_first_payload": (blobs[0][1] + 5, f"truncated: blob #0 'metadata' needs {blobs[0][2]} bytes at offset 0 "
                                                  f"but the file has {blobs[0][1] + 5} bytes"),
        "inside_second_header": (blobs[1][0] + 10, f"truncated: blob #1 header needs 64 bytes at offset {blobs[1][0]} "
                                                   f"but the file has {blobs[1][0] + 10} bytes"),
        "last_byte": (len(data) - 1, f"truncated: blob #3 'compiler' needs {blobs[3][2]} bytes at offset {blobs[3][0]} "
                                     f"but the file has {len(data) - 1} bytes"),
    }[where]
    path = _write(tmp_path / "cut.popef", data[:cut])
    assert _open_error(path) == f"{path}: {expected}"


def test_flipped_payload_byte(popef_path, tmp_path):
    data = bytearray(popef_path.read_bytes())
    data[_offsets(data)[2][1] + 7] ^= 0x01
    path = _write(tmp_path / "flip.popef", data)
    assert _open_error(path) == f"{path}: corrupted: payload checksum mismatch in blob #2 (TensorData 'W')"


@pytest.mark.parametrize("byte", [14, 20, 33, 50])
def test_flipped_header_byte(popef_path, tmp_path, byte):
    data = bytearray(popef_path.read_bytes())
    second = _offsets(data)[1][0]
    data[second + byte] ^= 0x10
    path = _write(tmp_path / "flip.popef", data)
    assert _open_error(path) == f"{path}: corrupted: header checksum mismatch in blob #1 ('executable')"


def test_bad_magic_first_and_later_blob(popef_path, tmp_path):
    data = bytearray(popef_path.read_bytes())
    bad = bytearray(data)
    bad[0:8] = b"NOTPOPEF"
    path = _write(tmp_path / "bad.popef", bad)
    assert _open_error(path) == f"{path}: not a PopEF file (bad magic at offset 0)"
    later = _offsets(data)[2][0]
    data[later] ^= 0xFF
    path = _write(tmp_path / "bad2.popef", data)
    assert _open_error(path) == f"{path}: not a PopEF file (bad magic at offset {later})"


def _patch_header(data, offset, fmt_offset, value_fmt, value):
    struct.pack_into(value_fmt, data, offset + fmt_offset, value)
    name_size = struct.unpack_from("<I", data, offset + 16)[0]
    name = bytes(data[offset + HEADER_SIZE:offset + HEADER_SIZE + name_size])
    struct.pack_into("<I", data, offset + 60, crc32(bytes(data[offset:offset + 60]), name))


def test_major_version_2_is_refused_and_higher_minor_accepted(popef_path, tmp_path):
    data = bytearray(popef_path.read_bytes())
    minor = bytearray(data)
    _patch_header(minor, 0, 10, "<H", 7)
    assert PopefFile(bytes(minor)).blobs[0].version == (1, 7)
    _patch_header(data, 0, 8, "<H", 2)
    path = _write(tmp_path / "v2.popef", data)
    assert _open_error(path) == f"{path}: unsupported PopEF major version 2 (this reader supports 1)"


def test_unknown_blob_type(popef_path, tmp_path):
    data = bytearray(popef_path.read_bytes())
    _patch_header(data, _offsets(data)[3][0], 12, "<H", 9)
    path = _write(tmp_path / "type.popef", data)
    assert _open_error(path) == f"{path}: blob #3 'compiler' has unknown blob type 9"


def test_empty_and_missing_files(tmp_path):
    path = _write(tmp_path / "empty.popef", b"")
    assert _open_error(path) == f"{path}: empty file"
    with pytest.raises(FileNotFoundError, match="nothere.popef: PopEF file not found"):
        PopefFile.open(str(tmp_path / "nothere.popef"))


def test_executable_requires_exactly_one_metadata_and_executable():
    data = encode_popef([(BlobType.EXECUTABLE, "executable", json_payload({"version": 1}))])
    with pytest.raises(PopefError, match="expected exactly one Metadata blob, found 0"):
        Executable(data)
    data = encode_popef([(BlobType.METADATA, "metadata", b"{not json")] * 1 +
                        [(BlobType.EXECUTABLE, "executable", json_payload({}))])
    with pytest.raises(PopefError, match="Metadata blob 'metadata' is not valid JSON"):
        Executable(data)


def test_tensor_data_size_must_match_its_metadata_entry():
    meta = dict(METADATA, tensor_data=[{"name": "W", "dtype": "float32", "shape": [5, 4], "nbytes": 80}])
    popef = PopefFile(encode_popef([(BlobType.METADATA, "metadata", json.dumps(meta).encode()),
                                    (BlobType.TENSOR_DATA, "W", W.tobytes())]))
    with pytest.raises(PopefError, match="TensorData 'W' has 100 bytes, its dtype float32 and shape \\[5, 4\\] need 80"):
        popef.tensor_data()


@pytest.mark.parametrize("metadata,executable,message", [
    ({"anchors": [3]}, {}, "Metadata.anchors[0]: expected an object, got a number"),
    ({}, {"tensors": [{"id": [1]}]}, "Executable.tensors[0].id: expected an integer, got a list"),
    ({}, {"programs": {"load": [{"op": "LoadTensorData", "offset": "0"}]}},
     "Executable.programs.load[0].offset: expected an integer, got a string"),
    ({"program_flow": {"main": "main"}}, {}, "Metadata.program_flow.main: expected a list, got a string"),
])
def test_json_layout_errors_name_the_path(metadata, executable, message):
    popef = PopefFile(encode_popef([(BlobType.METADATA, "metadata", json_payload(metadata)),
                                    (BlobType.EXECUTABLE, "executable", json_payload(executable))]), "m.popef")
    with pytest.raises(PopefError) as e:
        popef.metadata, popef.executable
    assert str(e.value) == f"m.popef: {message}"


@pytest.mark.parametrize("entry,message", [
    ({"name": "W", "dtype": "object", "shape": [5, 5]}, "has dtype 'object' in Metadata.tensor_data"),
    ({"name": "W", "dtype": "float32", "shape": [-5, -5]}, "has shape [-5, -5] in Metadata.tensor_data"),
])
def test_tensor_data_table_with_bad_dtype_or_shape_is_refused(entry, message):
    popef = PopefFile(encode_popef([(BlobType.METADATA, "metadata", json_payload({"tensor_data": [entry]})),
                                    (BlobType.TENSOR_DATA, "W", W.tobytes())]), "m.popef")
    with pytest.raises(PopefError, match=message.replace("[", r"\[")):
        popef.tensor_data()


def test_opaque_that_is_not_json_is_a_popef_error():
    popef = PopefFile(encode_popef([(BlobType.OPAQUE, "compiler", b"\xff{")]), "m.popef")
    with pytest.raises(PopefError, match="Opaque blob 'compiler' is not valid JSON"):
        popef.opaque_json("compiler")
