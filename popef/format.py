"""Byte layout of the PopEF container (see docs/popef.md): blob header, types, alignment."""
import enum
import struct
import zlib

MAGIC = b"POPEFBLB"
VERSION_MAJOR = 1
VERSION_MINOR = 0
ALIGNMENT = 64
HEADER_SIZE = 64

# magic, major, minor, type, flags, name_size, payload_crc32, payload_offset, payload_size,
# total_size, reserved, header_crc32
HEADER = struct.Struct("<8sHHHHIIQQQ12sI")
assert HEADER.size == HEADER_SIZE


class BlobType(enum.IntEnum):
    METADATA = 1
    EXECUTABLE = 2
    TENSOR_DATA = 3
    OPAQUE = 4

    @property
    def label(self) -> str:
        return {1: "Metadata", 2: "Executable", 3: "TensorData", 4: "Opaque"}[self.value]


def crc32(*chunks: bytes) -> int:
    value = 0
    for chunk in chunks:
        value = zlib.crc32(chunk, value)
    return value & 0xFFFFFFFF


def align_up(n: int, alignment: int = ALIGNMENT) -> int:
    return (n + alignment - 1) // alignment * alignment


class PopefError(ValueError):
    """A PopEF file that cannot be read: names the file and what is wrong."""
