"""Structure-aware mutation of the server's JSON request bodies: parse, change one node
(numbers to 0 / -1 / 2^31 / 2^63 / huge / float, lists duplicated, emptied or nested deeper,
keys deleted or renamed, values swapped for another JSON type), re-serialize. Bodies that do
not parse (or the binary part after a KServe header) are left to libFuzzer's byte mutations.
`mutate_request_json` keeps a 4-byte header-length prefix (serving_kserve_rest) intact."""
import copy
import json
import random
import struct

_NUMBERS = (0, -1, 1, 2 ** 31, 2 ** 31 - 1, 2 ** 32, 2 ** 63 - 1, 2 ** 64, 10 ** 30, 0.5,
            -0.0, 1e308)
_ODD = (None, True, "", "x", {}, [], {"b64": "////"}, {"b64": "!"}, [[]], "FP32", "BYTES")


def _nodes(value, path=()):
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _nodes(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _nodes(item, path + (index,))


def _replace(root, path, new):
    if not path:
        return new
    parent = root
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = new
    return root


def _mutated(value, rng: random.Random):
    # A fresh copy: the constants above are shared, and a node may be mutated again later.
    return copy.deepcopy(_mutation(value, rng))


def _mutation(value, rng: random.Random):
    if isinstance(value, bool) or value is None:
        return rng.choice(_ODD + _NUMBERS)
    if isinstance(value, (int, float)):
        return rng.choice(_NUMBERS + _ODD[:3])
    if isinstance(value, list):
        choice = rng.randrange(5)
        if choice == 0 and value:
            return value + value[: rng.randint(1, len(value))]
        if choice == 1:
            return value[: rng.randint(0, len(value))]
        if choice == 2:
            return [value] * rng.randint(1, 3)
        if choice == 3 and value:
            return [rng.choice(value)] + value
        return rng.choice(_ODD)
    if isinstance(value, dict):
        if value and rng.random() < 0.5:
            key = rng.choice(list(value))
            renamed = dict(value)
            item = renamed.pop(key)
            if rng.random() < 0.5:
                renamed[key + rng.choice(("_", "s", ""))] = item
            return renamed
        return rng.choice(_ODD)
    return rng.choice(_ODD + _NUMBERS)


def mutate_json(data: bytes, rng: random.Random):
    """A mutated JSON text, or None if `data` is not JSON."""
    try:
        root = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    for _ in range(rng.randint(1, 3)):
        path, value = rng.choice(list(_nodes(root)))
        root = _replace(root, path, _mutated(value, rng))
    return json.dumps(root).encode()


def mutate_request_json(data: bytes, rng: random.Random):
    """A KServe REST target input (4-byte header length, JSON header, binary rest) mutated in
    its JSON header; the length follows the new header unless it was 'no header'."""
    if len(data) < 4:
        return None
    (length,) = struct.unpack_from("<I", data)
    body = data[4:]
    if length == 0xFFFFFFFF:
        mutated = mutate_json(body, rng)
        return None if mutated is None else data[:4] + mutated
    header, binary = body[:length], body[length:]
    mutated = mutate_json(header, rng)
    if mutated is None:
        return None
    if rng.random() < 0.2:
        binary = binary[: rng.randint(0, len(binary))]
    return struct.pack("<I", len(mutated)) + mutated + binary
