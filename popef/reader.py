"""Reads and validates PopEF files (docs/popef.md). Every problem raises PopefError naming the
file, the blob and what is wrong; nothing here can crash on hostile input."""
import dataclasses
import json
import math
import os
from typing import Dict, List, Optional, Union

import numpy as np

from popef.format import (
    HEADER, HEADER_SIZE, MAGIC, VERSION_MAJOR, BlobType, PopefError, crc32,
)
from popef.schema import check_executable, check_metadata

# The element types a PopEF tensor may have (the runtime's DType names).
TENSOR_DTYPES = ("float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "bool")


@dataclasses.dataclass
class Blob:
    type: BlobType
    name: str
    offset: int          # file offset of the blob header
    payload_offset: int  # file offset of the payload
    payload: memoryview
    version: tuple


def read_bytes(path: Union[str, os.PathLike]) -> bytes:
    """The bytes of the PopEF file at `path` (FileNotFoundError naming it if absent)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: PopEF file not found")
    with open(path, "rb") as f:
        return f.read()


class PopefFile:
    """A parsed PopEF file: its blobs, plus convenient access to Metadata/Executable/Opaques."""

    def __init__(self, data: Union[bytes, bytearray, memoryview], source: str = "<memory>"):
        self.source = source
        self.data = memoryview(data)
        self.blobs: List[Blob] = _parse(self.data, source)

    @classmethod
    def open(cls, path: Union[str, os.PathLike]) -> "PopefFile":
        return cls(read_bytes(path), os.fspath(path))

    def _blobs_of(self, blob_type: BlobType) -> List[Blob]:
        return [b for b in self.blobs if b.type == blob_type]

    def _single_json(self, blob_type: BlobType) -> dict:
        found = self._blobs_of(blob_type)
        if len(found) != 1:
            raise PopefError(f"{self.source}: expected exactly one {blob_type.label} blob, found {len(found)}")
        try:
            return json.loads(bytes(found[0].payload).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise PopefError(f"{self.source}: {blob_type.label} blob '{found[0].name}' is not valid JSON: {e}") from None

    @property
    def metadata(self) -> dict:
        doc = self._single_json(BlobType.METADATA)
        check_metadata(doc, f"{self.source}: Metadata")
        return doc

    @property
    def executable(self) -> dict:
        doc = self._single_json(BlobType.EXECUTABLE)
        check_executable(doc, f"{self.source}: Executable")
        return doc

    @property
    def opaques(self) -> Dict[str, bytes]:
        return {b.name: bytes(b.payload) for b in self._blobs_of(BlobType.OPAQUE)}

    def opaque_json(self, name: str) -> Optional[dict]:
        raw = self.opaques.get(name)
        if raw is None:
            return None
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise PopefError(f"{self.source}: Opaque blob '{name}' is not valid JSON: {e}") from None

    def tensor_data(self) -> Dict[str, np.ndarray]:
        """Weights as numpy arrays (views on the file bytes), typed by the Metadata table."""
        table = {t.get("name"): t for t in self.metadata.get("tensor_data", [])}
        out = {}
        for blob in self._blobs_of(BlobType.TENSOR_DATA):
            info = table.get(blob.name)
            if info is None:
                raise PopefError(f"{self.source}: TensorData '{blob.name}' is not described in Metadata.tensor_data")
            if info.get("dtype") not in TENSOR_DTYPES:
                raise PopefError(f"{self.source}: TensorData '{blob.name}' has dtype {info.get('dtype')!r} in "
                                 f"Metadata.tensor_data; expected one of {', '.join(TENSOR_DTYPES)}")
            shape = info.get("shape")
            if shape is None or any(d < 0 for d in shape):
                raise PopefError(f"{self.source}: TensorData '{blob.name}' has shape {shape} in "
                                 f"Metadata.tensor_data; expected a list of non-negative dims")
            dtype = np.dtype(info["dtype"])
            expected = math.prod(shape) * dtype.itemsize
            if expected != len(blob.payload):
                raise PopefError(f"{self.source}: TensorData '{blob.name}' has {len(blob.payload)} bytes, "
                                 f"its dtype {info['dtype']} and shape {info['shape']} need {expected}")
            out[blob.name] = np.frombuffer(blob.payload, dtype=dtype).reshape(info["shape"])
        return out


def _parse(data: memoryview, source: str) -> List[Blob]:
    size = len(data)
    if size == 0:
        raise PopefError(f"{source}: empty file")
    blobs, offset, i = [], 0, 0
    named = {}  # TensorData/Opaque names are keys: (type, name) -> blob index
    while offset < size:
        if offset + HEADER_SIZE > size:
            raise PopefError(f"{source}: truncated: blob #{i} header needs {HEADER_SIZE} bytes at offset "
                             f"{offset} but the file has {size} bytes")
        (magic, major, minor, btype, _flags, name_size, payload_crc, payload_offset, payload_size,
         total_size, _reserved, header_crc) = HEADER.unpack_from(data, offset)
        if magic != MAGIC:
            raise PopefError(f"{source}: not a PopEF file (bad magic at offset {offset})")
        if major != VERSION_MAJOR:
            raise PopefError(f"{source}: unsupported PopEF major version {major} "
                             f"(this reader supports {VERSION_MAJOR})")
        name_end = offset + HEADER_SIZE + name_size
        if name_end > size:
            raise PopefError(f"{source}: truncated: blob #{i} name needs {name_size} bytes at offset "
                             f"{offset + HEADER_SIZE} but the file has {size} bytes")
        name_bytes = bytes(data[offset + HEADER_SIZE:name_end])
        name = name_bytes.decode("utf-8", errors="replace")
        if crc32(bytes(data[offset:offset + 60]), name_bytes) != header_crc:
            raise PopefError(f"{source}: corrupted: header checksum mismatch in blob #{i} ('{name}')")
        try:
            blob_type = BlobType(btype)
        except ValueError:
            raise PopefError(f"{source}: blob #{i} '{name}' has unknown blob type {btype}") from None
        if (payload_offset < HEADER_SIZE + name_size or total_size < payload_offset + payload_size
                or total_size == 0):
            raise PopefError(f"{source}: corrupted: inconsistent sizes in blob #{i} ({blob_type.label} '{name}')")
        if offset + total_size > size:
            raise PopefError(f"{source}: truncated: blob #{i} '{name}' needs {total_size} bytes at offset "
                             f"{offset} but the file has {size} bytes")
        start = offset + payload_offset
        payload = data[start:start + payload_size]
        if crc32(payload) != payload_crc:
            raise PopefError(f"{source}: corrupted: payload checksum mismatch in blob #{i} "
                             f"({blob_type.label} '{name}')")
        if blob_type in (BlobType.TENSOR_DATA, BlobType.OPAQUE):
            first = named.setdefault((blob_type, name), i)
            if first != i:
                raise PopefError(f"{source}: blob #{i} ({blob_type.label} '{name}') has the same name as blob #{first}")
        blobs.append(Blob(blob_type, name, offset, start, payload, (major, minor)))
        offset += total_size
        i += 1
    return blobs
