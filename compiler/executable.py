"""A compiled model: the PopEF bytes plus their parsed Metadata and Executable JSON. The runtime's
ModelRunner accepts it directly (it only calls `to_bytes()`)."""
import json
import os
from typing import Dict, List, Optional, Union

from popef.reader import PopefFile, read_bytes


class Executable:
    def __init__(self, data: Union[bytes, bytearray], source: str = "<memory>"):
        self._data = bytes(data)
        popef = PopefFile(self._data, source)  # validates: the bytes must read back
        self.metadata: dict = popef.metadata
        self.executable: dict = popef.executable
        self.opaques: Dict[str, bytes] = popef.opaques

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "Executable":
        return cls(read_bytes(path), os.fspath(path))

    def to_bytes(self) -> bytes:
        return self._data

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Writes atomically (temp file + rename): a crash never leaves half a PopEF."""
        path = os.fspath(path)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(self._data)
        os.replace(tmp, path)

    def anchors(self, direction: str = None) -> List[dict]:
        return [a for a in self.metadata["anchors"] if direction is None or a["direction"] == direction]

    def opaque_json(self, name: str) -> Optional[dict]:
        """The Opaque blob `name` parsed as JSON (e.g. "fusion", "compiler"); None if absent."""
        payload = self.opaques.get(name)
        return None if payload is None else json.loads(payload.decode("utf-8"))

    @property
    def weights_bytes(self) -> int:
        return int(self.metadata["device_memory"]["weights_bytes"])

    @property
    def arena_bytes(self) -> int:
        return int(self.metadata["device_memory"]["arena_bytes"])

    def __repr__(self) -> str:
        names = lambda d: ", ".join(a["name"] for a in self.anchors(d))  # noqa: E731
        return (f"Executable({self.metadata['ipu_version']}, inputs [{names('input')}], outputs "
                f"[{names('output')}], {len(self._data):,} bytes)")
