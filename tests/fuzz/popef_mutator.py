"""Structure-aware PopEF mutations: decode the container with popef.reader, change the Metadata /
Executable JSON (numbers, keys, lists, strings, types), the TensorData bytes or the blob list,
and re-encode with popef.writer so every CRC is valid and the JSON parses. Random byte edits
would stop at the CRC check; these reach the parser, the memory plan and the kernels."""
import copy
import json
import random
import struct
from typing import Any, List, Optional, Tuple

from popef.format import HEADER, BlobType, PopefError, crc32
from popef.reader import PopefFile
from popef.writer import encode_popef, json_payload

INTERESTING_INTS = [0, 1, -1, 2, 3, 7, 8, 63, 64, 65, 255, 256, 1 << 16, (1 << 31) - 1, 1 << 31, 1 << 32,
                    (1 << 40) + 1, 1 << 48, (1 << 58) + 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 1 << 64, -(1 << 63)]
INTERESTING_VALUES = [None, True, False, "", "x", [], {}, 0.5, -0.0, 1e308, [0], [-1], [1 << 40, 1 << 40]]
Blobs = List[Tuple[BlobType, str, bytes]]


def _interesting_value(rng: random.Random):
    return copy.deepcopy(rng.choice(INTERESTING_VALUES))  # fresh: the document may be mutated further


def _nodes(doc: Any, out: List[Tuple[Any, Any]]) -> List[Tuple[Any, Any]]:
    """Every (container, key) pair of a JSON document."""
    if isinstance(doc, dict):
        for k in list(doc):
            out.append((doc, k))
            _nodes(doc[k], out)
    elif isinstance(doc, list):
        for i in range(len(doc)):
            out.append((doc, i))
            _nodes(doc[i], out)
    return out


def _leaves_of_type(doc: Any, kind) -> List[Any]:
    return [c[k] for c, k in _nodes(doc, []) if isinstance(c[k], kind) and not isinstance(c[k], bool)]


def mutate_json(doc: Any, rng: random.Random) -> Any:
    """One random edit of a JSON document (in place when possible; returns the document)."""
    nodes = _nodes(doc, [])
    if not nodes:
        return _interesting_value(rng)
    container, key = rng.choice(nodes)
    value = container[key]
    choice = rng.randrange(10)
    if choice == 0 and isinstance(container, dict):
        del container[key]
    elif choice == 1 and isinstance(container, list):
        container.insert(rng.randrange(len(container) + 1), json.loads(json.dumps(value)))
    elif choice == 2 and isinstance(container, list):
        del container[key]
    elif choice == 3 and isinstance(value, int) and not isinstance(value, bool):
        container[key] = value + rng.choice([-64, -1, 1, 64])
    elif choice == 4:
        ints = _leaves_of_type(doc, int)
        container[key] = rng.choice(ints) if ints and rng.random() < 0.5 else rng.choice(INTERESTING_INTS)
    elif choice == 5:
        strings = _leaves_of_type(doc, str)
        if strings:
            container[key] = rng.choice(strings)
    elif choice == 6:
        container[key] = _interesting_value(rng)
    elif choice == 7:  # splice: copy another node's value here (edges, shapes, names)
        other_container, other_key = rng.choice(nodes)
        container[key] = json.loads(json.dumps(other_container[other_key]))
    elif choice == 8 and isinstance(container, list) and len(container) > 1:
        j = rng.randrange(len(container))
        container[key], container[j] = container[j], container[key]
    elif choice == 9 and isinstance(value, str):
        container[key] = value + rng.choice(["", "_", "0", "/x"]) if value else "main"
    else:
        container[key] = rng.choice(INTERESTING_INTS)
    return doc


def _mutate_blob_list(blobs: Blobs, rng: random.Random) -> Blobs:
    blobs = list(blobs)
    i = rng.randrange(len(blobs))
    choice = rng.randrange(5)
    if choice == 0 and len(blobs) > 1:
        del blobs[i]
    elif choice == 1:
        blobs.insert(rng.randrange(len(blobs) + 1), blobs[i])
    elif choice == 2:
        j = rng.randrange(len(blobs))
        blobs[i], blobs[j] = blobs[j], blobs[i]
    elif choice == 3:
        names = [b[1] for b in blobs] + ["", "metadata", "W"]
        blobs[i] = (blobs[i][0], rng.choice(names), blobs[i][2])
    else:
        blobs[i] = (BlobType(rng.randint(1, 4)), blobs[i][1], blobs[i][2])
    return blobs


def _mutate_bytes(payload: bytes, rng: random.Random) -> bytes:
    data = bytearray(payload)
    choice = rng.randrange(3)
    if choice == 0 and data:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif choice == 1 and data:
        del data[rng.randrange(len(data)):]
    else:
        data += bytes(rng.choice([1, 4, 64]))
    return bytes(data)


def _tamper_header(data: bytes, rng: random.Random) -> bytes:
    """Change one size/version field of one blob header and re-sign the header CRC, so the
    reader's own size checks (not the checksum) must catch it."""
    out = bytearray(data)
    offsets, offset = [], 0
    while offset + HEADER.size <= len(out):
        fields = list(HEADER.unpack_from(out, offset))
        offsets.append(offset)
        if fields[9] <= 0:
            break
        offset += fields[9]
    if not offsets:
        return data
    at = rng.choice(offsets)
    fields = list(HEADER.unpack_from(out, at))
    index = rng.choice([1, 2, 4, 5, 7, 8, 9])  # major, minor, flags, name_size, payload_offset/size, total_size
    limit = {1: 0xFFFF, 2: 0xFFFF, 4: 0xFFFF, 5: 0xFFFFFFFF}.get(index, (1 << 64) - 1)
    fields[index] = min(limit, max(0, rng.choice([fields[index] + rng.choice([-64, -1, 1, 64]),
                                                   rng.choice(INTERESTING_INTS)])))
    fields[-1] = 0
    struct.pack_into(HEADER.format, out, at, *fields)
    name_size = min(fields[5], max(0, len(out) - at - HEADER.size))
    fields[-1] = crc32(bytes(out[at:at + 60]), bytes(out[at + HEADER.size:at + HEADER.size + name_size]))
    struct.pack_into(HEADER.format, out, at, *fields)
    return bytes(out)


def mutate_popef(data: bytes, rng: random.Random) -> Optional[bytes]:
    """A mutated, validly checksummed PopEF; None if `data` is not a readable PopEF."""
    try:
        blobs: Blobs = [(b.type, b.name, bytes(b.payload)) for b in PopefFile(data).blobs]
    except PopefError:
        return None
    if not blobs:
        return None
    r = rng.random()
    if r < 0.05:
        return _tamper_header(data, rng)
    if r < 0.12:
        blobs = _mutate_blob_list(blobs, rng)
    elif r < 0.2:
        i = rng.randrange(len(blobs))
        blobs[i] = (blobs[i][0], blobs[i][1], _mutate_bytes(blobs[i][2], rng))
    else:
        json_blobs = [i for i, b in enumerate(blobs) if b[0] in (BlobType.METADATA, BlobType.EXECUTABLE)]
        if not json_blobs:
            return None
        i = rng.choice(json_blobs)
        try:
            doc = json.loads(blobs[i][2])
        except (UnicodeDecodeError, ValueError):
            return None
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            doc = mutate_json(doc, rng)
        blobs[i] = (blobs[i][0], blobs[i][1], json_payload(doc))
    return encode_popef(blobs)
