"""Structure-aware mutations of a YAML config: parse it with yaml.safe_load, apply the JSON
document edits of popef_mutator (values, keys, lists, types) and dump it again, so the config
reader sees parseable YAML with wrong content."""
import copy
import random
from typing import Optional

import yaml

from popef_mutator import mutate_json

EXTRA_VALUES = ["../../../../etc/passwd", "/dev/zero", "missing.onnx", "conv_matmul.onnx", "add_reshape.onnx",
                "gemm_pool.onnx", ["X=1,2"], ["X=0,2"], ["X=-1"], ["X=99999999999,99999999999"], "fp8", "graph 0"]


def mutate_yaml(data: bytes, rng: random.Random) -> Optional[bytes]:
    try:
        doc = yaml.safe_load(data)
    except (yaml.YAMLError, UnicodeDecodeError, ValueError):
        return None
    entries = doc.get("model_fusion") if isinstance(doc, dict) else None
    if rng.random() < 0.2 and isinstance(entries, list) and entries:
        entry = rng.choice(entries)
        if isinstance(entry, dict) and entry:
            entry[rng.choice(list(entry))] = copy.deepcopy(rng.choice(EXTRA_VALUES))
    else:
        for _ in range(rng.choice([1, 1, 2])):
            doc = mutate_json(doc, rng)
    try:
        return yaml.safe_dump(doc, sort_keys=False).encode("utf-8")
    except (yaml.YAMLError, ValueError, TypeError):
        return None
