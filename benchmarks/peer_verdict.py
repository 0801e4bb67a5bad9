"""What a latency cell's figures mean against the peers: the ratio of our latency to the best
peer's, and the target the cell is held to.

Each side gets its better figure: our median in whichever timing mode (interleaved or blocks)
was faster, against the fastest fp32 peer (onnxruntime or OpenVINO) in either mode. The ratio in
each mode on its own (ours / the best peer of that mode) is kept alongside."""
from typing import Dict, Optional

from model_zoo import TUNED

TUNED_TARGET = 0.90   # the networks the kernels were tuned on: every cell, fp32 and fp16
FAMILY_TARGET = 1.0   # every other family: fp32 cells
OP_CLASS_LIMIT = 1.5  # no op class of a model's profile above this multiple of the peer's time
OP_CLASS_MIN_SHARE = 0.02  # ... among the classes holding this share of our run (the rest is profiler noise)


def best_peer_ratio(ours: Dict[str, float], peers: Dict[str, Dict[str, float]]) -> dict:
    """ours: {mode: our median ms}; peers: {mode: {peer: median ms}} (peers that ran)."""
    if not ours:
        raise ValueError("no figure of ours to compare")
    candidates = [(ms, peer, mode) for mode, by_peer in peers.items() for peer, ms in by_peer.items()]
    if not candidates:
        raise ValueError("no peer figure to compare against")
    our_mode = min(ours, key=ours.get)
    peer_ms, peer, peer_mode = min(candidates)
    return {"ours_ms": ours[our_mode], "ours_mode": our_mode, "peer": peer, "peer_mode": peer_mode,
            "peer_ms": peer_ms, "ratio": ours[our_mode] / peer_ms,
            "by_mode": {mode: ours[mode] / min(by_peer.values()) for mode, by_peer in peers.items()
                        if mode in ours and by_peer}}


def target(model: str, precision: str) -> Optional[float]:
    """The ratio a cell must not exceed, or None where no target applies (fp16 of the families)."""
    if model in TUNED:
        return TUNED_TARGET
    return FAMILY_TARGET if precision == "fp32" else None


def meets(ratio: float, limit: Optional[float]) -> Optional[bool]:
    return None if limit is None else ratio <= limit
