"""Weight memory: constant tensors laid out at 64-byte aligned offsets, each distinct content
stored once (keyed by dtype + SHA-256 of the bytes), so identical constants of one model, or of
several fused models, share memory and one TensorData blob."""
import dataclasses
import hashlib
from typing import Dict, List

import numpy as np

from popef.format import align_up


@dataclasses.dataclass
class StoredWeight:
    key: str          # content key
    name: str         # TensorData blob name (unique in the file)
    dtype: str
    shape: tuple
    offset: int       # in weight memory
    data: np.ndarray  # little-endian, C-contiguous

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)


class WeightStore:
    def __init__(self):
        self._by_key: Dict[str, StoredWeight] = {}
        self._names: set = set()
        self.entries: List[StoredWeight] = []
        self.size = 0  # bytes of weight memory used (end of the last entry, 64-aligned)

    def add(self, name: str, array: np.ndarray) -> StoredWeight:
        """Stores `array` (or finds identical stored bytes) and returns its entry."""
        data = np.ascontiguousarray(array)
        if data.dtype.byteorder == ">":
            data = data.astype(data.dtype.newbyteorder("<"))
        key = f"{data.dtype.name}:{hashlib.sha256(data.tobytes()).hexdigest()}"
        found = self._by_key.get(key)
        if found is not None:
            return found
        blob_name, n = name, 1
        while blob_name in self._names:  # fused models may reuse a name for different contents
            n += 1
            blob_name = f"{name}#{n}"
        entry = StoredWeight(key, blob_name, data.dtype.name, tuple(int(d) for d in data.shape), self.size, data)
        self._names.add(blob_name)
        self._by_key[key] = entry
        self.entries.append(entry)
        self.size = align_up(self.size + entry.nbytes)
        return entry

    def get(self, key: str) -> StoredWeight:
        return self._by_key[key]
