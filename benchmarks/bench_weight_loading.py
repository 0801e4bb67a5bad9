"""PopEF load time and peak resident memory with weights used in place from the mmap'd file
(the default) vs copied into device memory (TF_POPEF_MMAP_WEIGHTS=0), on an MLP with large
weights.

Each measurement runs in a fresh process (peak RSS is per process): it imports the runtime,
notes its RSS, creates a ModelRunner from the PopEF file (parse + checksum + prepare + load),
runs one request, and reports the ModelRunner construction time, the first request's time, and
the growth of peak RSS over the pre-load RSS. The modes alternate, --repeat times each.

    .venv/bin/python benchmarks/bench_weight_loading.py [--sizes 1024 4096 4096 1024] [--repeat 3]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, sys, time
import numpy as np
from tf_popef_op.runtime import ModelRunner

def status_kb(field):  # VmRSS: resident now; VmHWM: peak resident since exec (ru_maxrss would
    with open("/proc/self/status") as f:  # include the parent's peak, inherited through fork)
        return next(int(l.split()[1]) for l in f if l.startswith(field + ":"))

def rss_kb():
    return status_kb("VmRSS")

path, width = sys.argv[1], int(sys.argv[2])
x = np.ones((1, width), np.float32)
before = rss_kb()
t0 = time.perf_counter()
runner = ModelRunner(path)
t1 = time.perf_counter()
runner.execute({"X": x})
t2 = time.perf_counter()
peak = status_kb("VmHWM")
s = runner.stats()
print(json.dumps({"load_s": t1 - t0, "first_s": t2 - t1, "peak_growth_kb": peak - before, "rss_kb": rss_kb() - before,
                  "mapped": s["mapped_weights_bytes"], "copied": s["copied_weights_bytes"],
                  "device_load_ns": s["last_load_ns"]}))
"""


def measure(path, width, mmap_on):
    env = dict(os.environ, TF_POPEF_MMAP_WEIGHTS="1" if mmap_on else "0")
    out = subprocess.run([sys.executable, "-c", CHILD, path, str(width)], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 4096, 1024])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from compiler import Compiler
    from mlp_model import build_mlp

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mlp.popef")
        with open(path, "wb") as f:
            f.write(Compiler.compile(build_mlp(1, args.sizes)).to_bytes())
        size_mb = os.path.getsize(path) / 1e6
        runs = {True: [], False: []}
        for _ in range(args.repeat):
            for mode in (False, True):
                runs[mode].append(measure(path, args.sizes[0], mode))

    print(f"# bench_weight_loading: {platform.processor() or platform.machine()}, MLP "
          f"{'x'.join(map(str, args.sizes))}, PopEF {size_mb:.1f} MB, median of {args.repeat} fresh processes\n")
    print("| weights | ModelRunner() ms | of which device load ms | first execute ms | peak RSS growth MB | "
          "RSS after MB | mapped MB | copied MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for mode, label in ((False, "copied (TF_POPEF_MMAP_WEIGHTS=0)"), (True, "mapped from the PopEF (default)")):
        r = runs[mode]
        med = lambda k: statistics.median(x[k] for x in r)  # noqa: E731
        print(f"| {label} | {med('load_s') * 1e3:.1f} | {med('device_load_ns') / 1e6:.2f} | {med('first_s') * 1e3:.2f} | "
              f"{med('peak_growth_kb') / 1024:.1f} | {med('rss_kb') / 1024:.1f} | {r[0]['mapped'] / 1e6:.1f} | "
              f"{r[0]['copied'] / 1e6:.1f} |")


if __name__ == "__main__":
    main()
