"""DenseNet121's per-channel affine steps (`..._depthwise_affine`, the 1x1 depthwise NchwcConvs
of its pre-activation BatchNorms) in a profiled run: per dense block the steps, their time and
the bytes they read and write per second, then a sample of single steps.

    cd CHECKOUT && .venv/bin/python benchmarks/densenet_affine_steps.py DENSENET121-b1-fp32.popef [...]

(profile_model, which it imports, puts its own checkout first on the path.)
"""
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profile_model import profiled_runs, random_feeds  # noqa: E402
from tf_popef_op import runtime  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402
from popef.reader import PopefFile  # noqa: E402
HW = {"conv2": 56 * 56, "conv3": 28 * 28, "conv4": 14 * 14, "conv5": 7 * 7}
for path in sys.argv[1:]:
    f = PopefFile(open(path, "rb").read())
    chans = {}
    esize = 2 if "fp16" in path else 4
    for b in f.blobs:
        m = re.search(r"densenet121_1/(\w+?)_1/batchnorm.*depthwise_shift", b.name)
        if m:
            chans[m.group(1)] = len(b.payload) // esize
    with ModelRunner(path, RuntimeConfig(profile=True)) as r:
        feeds = random_feeds(r, None, np.random.default_rng(0))
        wall = profiled_runs(r, feeds, 20, 3)
        entries, summ = r.profile(), r.profile_summary()
    runs = summ["runs"]
    tot = 0; tb = 0; rows = []
    for e in entries:
        if not e["node"].endswith("_depthwise_affine"): continue
        key = re.search(r"densenet121_1/(\w+?)_1/batchnorm", e["node"]).group(1)
        blk = {"pool2": "conv2", "pool3": "conv3", "pool4": "conv4", "bn": "conv5"}.get(key.split("_")[0], key[:5])
        c = chans.get(key, 0); hw = HW[blk]; key = blk + ":" + key
        us = e["total_us"] / runs; by = 2 * c * hw * esize
        tot += us; tb += by; rows.append((key, c, hw, us, by / us / 1e3))
    print(f"# {path}: {runtime.num_threads()} threads, wall {wall*1e3:.2f} ms, {len(rows)} affine steps, "
          f"{tot/1e3:.3f} ms, {tb/1e6:.1f} MB, {tb/tot/1e3:.1f} GB/s")
    for blk in ("conv2", "conv3", "conv4", "conv5"):
        sel = [x for x in rows if x[0].startswith(blk)]
        if sel: print(f"  {blk}: {len(sel)} steps, {sum(x[3] for x in sel):.0f} us, mean {np.mean([x[3] for x in sel]):.1f} us/step, GB/s {np.mean([x[4] for x in sel]):.1f}")
    for x in rows[:: max(1, len(rows) // 12)]: print("   ", x[0], x[1], x[2], f"{x[3]:.1f} us", f"{x[4]:.1f} GB/s")
