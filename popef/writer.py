"""Writes PopEF files: a sequence of 64-byte aligned, checksummed blobs (docs/popef.md)."""
import json
import os
from typing import Iterable, Tuple, Union

from popef.format import (
    ALIGNMENT, HEADER, HEADER_SIZE, MAGIC, VERSION_MAJOR, VERSION_MINOR, BlobType, align_up, crc32,
)

Payload = Union[bytes, bytearray, memoryview]


def encode_blob(blob_type: BlobType, name: str, payload: Payload, offset: int = 0) -> bytes:
    """One blob whose header starts at file offset `offset` (a multiple of 64)."""
    if offset % ALIGNMENT:
        raise ValueError(f"blob offset {offset} is not {ALIGNMENT}-byte aligned")
    name_bytes = name.encode("utf-8")
    payload = bytes(payload)
    payload_offset = align_up(HEADER_SIZE + len(name_bytes))
    total_size = align_up(payload_offset + len(payload))
    fields = [MAGIC, VERSION_MAJOR, VERSION_MINOR, int(blob_type), 0, len(name_bytes),
              crc32(payload), payload_offset, len(payload), total_size, bytes(12), 0]
    header_wo_crc = HEADER.pack(*fields)[:60]
    fields[-1] = crc32(header_wo_crc, name_bytes)
    out = bytearray(HEADER.pack(*fields))
    out += name_bytes
    out += bytes(payload_offset - len(out))
    out += payload
    out += bytes(total_size - len(out))
    return bytes(out)


def json_payload(obj) -> bytes:
    return json.dumps(obj, indent=1, sort_keys=False).encode("utf-8")


def encode_popef(blobs: Iterable[Tuple[BlobType, str, Payload]]) -> bytes:
    out = bytearray()
    for blob_type, name, payload in blobs:
        out += encode_blob(blob_type, name, payload, len(out))
    return bytes(out)


def write_popef(path: Union[str, os.PathLike], blobs: Iterable[Tuple[BlobType, str, Payload]]) -> None:
    """Writes atomically (temp file + rename) so a crash never leaves a half-written PopEF."""
    data = encode_popef(blobs)
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)

