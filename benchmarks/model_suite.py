"""The per-model parts of bench_models.py: compiles (once per run, shared by the parts),
the latency cells (interleaved and block timing against onnxruntime and OpenVINO),
cross-request batching, the fresh-process memory probes and the per-op-class profiles."""
import copy
import gc
import os
from typing import Dict, List

import numpy as np
import onnx

import compile_stages
import cross_request_batching
import memory_probe
import model_zoo
import op_classes
import op_profiles
import openvino_peer
import peer_verdict
import sgemm_peak
from flop_count import count_flops
from interleaved_timing import blocks, interleaved, runs_per_block, summary
from model_contenders import modelrunner, onnxruntime_session, openvino_model, tensorflow_function

PRECISIONS = ("fp32", "fp16")
PEERS = ("onnxruntime fp32", "OpenVINO fp32")  # the fp32 models the verdict holds against
# OpenVINO's fp16 inference-precision hint: on CPUs without AVX512-FP16 its CPU plugin runs bf16
# instead (openvino_peer.effective_settings shows which); timed for information, not a peer.
OPENVINO_LOW = "OpenVINO fp16 hint"


def error_line(e: Exception, limit: int = 400) -> str:
    """An exception as one report line: its type and the first line of its message."""
    return f"{type(e).__name__}: " + (str(e).strip().splitlines() or [""])[0][:limit]


def max_rel(got, want) -> float:
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def l2_rel(got, want) -> float:
    return float(np.linalg.norm((got - want).ravel()) / max(float(np.linalg.norm(want.ravel())), 1e-30))


def standard_onnx(model: onnx.ModelProto, batch: int, precision: str) -> onnx.ModelProto:
    """What onnxruntime runs and the FLOPs are counted on: the model through our converter with
    the batch fixed (and fp16 if asked) but without the passes of kind "fuse", which emit our own
    ai.tfpopef ops; onnxruntime applies its own fusions to the standard graph (ir_version 8)."""
    from compiler.converter import Converter
    from compiler.converter.pass_registry import list_all_passes
    fusing = [p.name for p in list_all_passes() if p.kind == "fuse"]
    standard = Converter(batch_size=batch, precision=precision, skip_passes=fusing).convert(copy.deepcopy(model))
    custom = sorted({f"{n.domain}:{n.op_type}" for n in standard.graph.node if n.domain not in ("", "ai.onnx")})
    if custom:
        raise RuntimeError(f"the converter still emits non-standard ops with the 'fuse' passes {fusing} skipped: "
                           f"{', '.join(custom)}; onnxruntime cannot run them")
    standard.ir_version = min(standard.ir_version, 8)
    return standard


class ModelSuite:
    def __init__(self, specs, threads, args, work_dir, log):
        self.specs, self.threads, self.args, self.work, self.log = specs, threads, args, work_dir, log
        self._onnx: Dict[str, onnx.ModelProto] = {}
        self._compiled: Dict[tuple, dict] = {}
        self._compile_errors: Dict[tuple, Exception] = {}
        self._keras = {}

    # -- shared artefacts ------------------------------------------------------------------
    def onnx_model(self, name):
        if name not in self._onnx:
            self._onnx[name] = onnx.load(model_zoo.cached_onnx_path(self.specs[name], self.log))
        return self._onnx[name]

    def compiled(self, name, batch, precision) -> dict:
        """{"executable", "standard", "stages", "compile_s", "popef_path", "onnx_path"}; compiled
        once per run (or loaded from benchmarks/.cache with --reuse-popef)."""
        key = (name, batch, precision)
        if key in self._compiled:
            return self._compiled[key]
        if key in self._compile_errors:  # failed earlier in this run: the same error, not a second compile
            raise self._compile_errors[key]
        try:
            return self._compile(key)
        except Exception as e:
            self._compile_errors[key] = e
            raise

    def _compile(self, key) -> dict:
        name, batch, precision = key
        from compiler import Executable
        spec = self.specs[name]
        cached = os.path.join(model_zoo.CACHE_DIR, f"{spec.cache_key}-b{batch}-{precision}.popef")
        self.log(f"compiling {spec.label} batch {batch} {precision}")
        if self.args.reuse_popef and os.path.exists(cached):
            from compiler.converter import Converter
            self.log(f"  reusing {os.path.relpath(cached)} (converting only, for onnxruntime and the FLOP count)")
            converted = Converter(batch_size=batch, precision=precision).convert(copy.deepcopy(self.onnx_model(name)))
            executable, stages, seconds = Executable.load(cached), {}, None
        else:
            executable, converted, stages, seconds = compile_stages.compile_with_stages(
                copy.deepcopy(self.onnx_model(name)), batch, precision)
            os.makedirs(model_zoo.CACHE_DIR, exist_ok=True)
            executable.save(cached)
        standard = standard_onnx(self.onnx_model(name), batch, precision)
        onnx_path = os.path.join(self.work, f"{name}-b{batch}-{precision}.onnx")
        onnx.save(standard, onnx_path)
        self._compiled[key] = {"executable": executable, "converted": converted if precision == "fp32" else None,
                               "standard": standard,
                               "stages": stages, "compile_s": seconds, "popef_path": cached, "onnx_path": onnx_path}
        return self._compiled[key]

    def keras_model(self, name):
        if name not in self._keras:
            self.log(f"building the Keras {self.specs[name].label} for TensorFlow")
            self._keras[name] = self.specs[name].build_keras()
        return self._keras[name]

    # -- part: compile ---------------------------------------------------------------------
    def compile_all(self, names: List[str], batches: List[int]) -> List[dict]:
        """Every PopEF of the run, compiled and cached (benchmarks/.cache) with its compile time;
        a later run with --reuse-popef times them without recompiling."""
        rows = []
        for name in names:
            for batch in batches:
                for precision in PRECISIONS:
                    row = {"model": name, "label": self.specs[name].label, "batch": batch, "precision": precision}
                    try:
                        c = self.compiled(name, batch, precision)
                        row.update(compile_s=c["compile_s"], stages=c["stages"])
                    except Exception as e:
                        row.update(compile_s=None, stages={}, failed=error_line(e))
                        self.log(f"  FAILED: {row['failed']}")
                    rows.append(row)
                    self._compiled.pop((name, batch, precision), None)  # keep memory flat
                    gc.collect()
        return rows

    # -- part: latency ---------------------------------------------------------------------
    def latency(self, names: List[str], batches: List[int], peak_contenders=(), progress=None):
        """peak_contenders (sgemm_peak.contenders): timed in every cell with the models; each
        cell then carries its own "peak". A model that fails to compile or run gives failure
        rows (the error, by model and batch) and the suite goes on. progress(cells): called after
        every model x batch (bench_models.py writes partial results)."""
        cells, compiles = [], []
        for name in names:
            for batch in batches:
                try:
                    group = self._latency_group(name, batch, list(peak_contenders))
                except Exception as e:  # reported as the cell's failure, never hidden
                    error = error_line(e)
                    self.log(f"  {self.specs[name].label} batch {batch} FAILED: {error}")
                    group = [{"model": name, "label": self.specs[name].label, "batch": batch, "precision": p,
                              "failed": error} for p in PRECISIONS]
                cells.extend(group)
                for precision in PRECISIONS:
                    c = self._compiled.get((name, batch, precision))
                    if c:
                        compiles.append({"model": name, "label": self.specs[name].label, "batch": batch,
                                         "precision": precision, "compile_s": c["compile_s"], "stages": c["stages"]})
                if progress:
                    progress(cells, compiles)
                gc.collect()
            self._keras.pop(name, None)
        return cells, compiles

    def _latency_group(self, name, batch, peak_contenders) -> List[dict]:
        spec = self.specs[name]
        x = spec.inputs(batch)
        fp32, fp16 = self.compiled(name, batch, "fp32"), self.compiled(name, batch, "fp16")
        flops = count_flops(fp32["standard"])
        output_names = [o.name for o in fp32["standard"].graph.output]
        contenders = [modelrunner("ModelRunner fp32", fp32["executable"], x),
                      modelrunner("ModelRunner fp16", fp16["executable"], x),
                      onnxruntime_session("onnxruntime fp32", fp32["standard"], x, self.threads)]
        peer_errors = {}

        def optional(label, make):
            """A peer that may not run this model: its error is reported, the cell goes on."""
            try:
                contender = make()
                contender.call()
                contenders.append(contender)
                return contender
            except Exception as e:
                peer_errors[label] = error_line(e, 300)
                self.log(f"  {label} does not run {spec.label}: {peer_errors[label]}")

        optional("onnxruntime fp16", lambda: onnxruntime_session("onnxruntime fp16", fp16["standard"], x, self.threads))
        ov32 = optional("OpenVINO fp32", lambda: openvino_model("OpenVINO fp32", fp32["onnx_path"], x, self.threads,
                                                                pinning=False))
        ov_low = optional(OPENVINO_LOW, lambda: openvino_model(OPENVINO_LOW, fp32["onnx_path"], x, self.threads, "fp16",
                                                               pinning=False))
        contenders.append(tensorflow_function("TensorFlow fp32", self.keras_model(name), x, output_names))

        for c in contenders:
            c.call()
        reference = contenders[2].outputs()  # onnxruntime fp32
        errors = {}
        for c in contenders:
            if c.name == "onnxruntime fp32":
                continue
            got = c.outputs()
            errors[c.name] = {k: {"max_rel": max_rel(got[k], v), "l2_rel": l2_rel(got[k], v)} for k, v in reference.items()}

        a = self.args
        self.log(f"timing {spec.label} batch {batch}, interleaved: {', '.join(c.name for c in contenders)}")
        samples = interleaved({c.name: c.call for c in contenders + peak_contenders}, a.warmup, a.min_iters,
                              a.max_iters, a.budget)
        peak = sgemm_peak.peak_from_samples(samples, a.peak_n, self.threads) if peak_contenders else None
        stats = {k: summary(v) for k, v in samples.items() if not k.startswith(sgemm_peak.PREFIX)}
        block_stats = self._blocks(spec, batch, x, fp32, contenders, stats) if a.block_rounds else {}
        ort32 = stats["onnxruntime fp32"]
        cells = []
        for precision in PRECISIONS:
            ours = stats[f"ModelRunner {precision}"]
            interleaved_peers = {k: stats[k]["median_ms"] for k in PEERS if k in stats}
            block_peers = {k: block_stats[k]["median_ms"] for k in PEERS if k in block_stats}
            verdict = peer_verdict.best_peer_ratio(
                {"interleaved": ours["median_ms"],
                 **({"blocks": block_stats[f"ModelRunner {precision}"]["median_ms"]} if block_stats else {})},
                {"interleaved": interleaved_peers, **({"blocks": block_peers} if block_peers else {})})
            cells.append({
                "model": name, "label": spec.label, "batch": batch, "precision": precision, "flops": flops,
                "ours": ours, "onnxruntime_fp32": ort32, "onnxruntime_fp16": stats.get("onnxruntime fp16"),
                "onnxruntime_fp16_error": peer_errors.get("onnxruntime fp16"), "peer_errors": peer_errors,
                "openvino_fp32": stats.get("OpenVINO fp32"), "openvino_low": stats.get(OPENVINO_LOW),
                "openvino_settings": openvino_peer.effective_settings(ov32.compiled) if ov32 else None,
                "openvino_low_settings": openvino_peer.effective_settings(ov_low.compiled) if ov_low else None,
                "tensorflow_fp32": stats["TensorFlow fp32"], "blocks": block_stats, "best_peer": verdict,
                "ratio_to_onnxruntime": ours["median_ms"] / ort32["median_ms"],
                "ratio_to_tensorflow": ours["median_ms"] / stats["TensorFlow fp32"]["median_ms"],
                "gflops": {k: flops / s["median_ms"] / 1e6 for k, s in stats.items()}, "peak": peak,
                "errors_vs_onnxruntime_fp32": {"ours": errors[f"ModelRunner {precision}"],
                                               "tensorflow": errors["TensorFlow fp32"],
                                               **({"onnxruntime_fp16": errors["onnxruntime fp16"]}
                                                  if "onnxruntime fp16" in errors else {}),
                                               **({"openvino_fp32": errors["OpenVINO fp32"]}
                                                  if "OpenVINO fp32" in errors else {})},
            })
            self.log(f"  {precision}: ours {ours['median_ms']:.2f} ms, onnxruntime fp32 {ort32['median_ms']:.2f} ms "
                     f"({cells[-1]['ratio_to_onnxruntime']:.2f}x), best peer {verdict['peer']} "
                     f"{verdict['peer_ms']:.2f} ms ({verdict['ratio']:.2f}x), TensorFlow "
                     f"{stats['TensorFlow fp32']['median_ms']:.2f} ms, {ours['iterations']} iterations"
                     + (f"; {cells[-1]['gflops'][f'ModelRunner {precision}'] / peak['peak_gflops']:.0%} of the "
                        f"cell's sgemm peak {peak['peak_gflops']:.0f} GFLOP/s" if peak else ""))
        del contenders
        return cells

    def _blocks(self, spec, batch, x, fp32, interleaved_contenders, stats) -> dict:
        """Block timing (interleaved_timing.blocks) of our two PopEFs and the fp32 peers, each
        peer at its defaults (a session / compiled model of its own): onnxruntime with its
        spinning workers on, OpenVINO with the thread pinning of its latency hint. Runs per block
        from the interleaved medians so the blocks fit the --budget."""
        a = self.args
        by_name = {c.name: c for c in interleaved_contenders}
        block = {n: by_name[n] for n in ("ModelRunner fp32", "ModelRunner fp16") if n in by_name}
        if "OpenVINO fp32" in by_name:
            block["OpenVINO fp32"] = openvino_model("OpenVINO fp32", fp32["onnx_path"], x, self.threads)
        block["onnxruntime fp32"] = onnxruntime_session("onnxruntime fp32", fp32["standard"], x, self.threads,
                                                        spinning=True)
        runs = runs_per_block({n: stats[n]["median_ms"] / 1e3 for n in block}, a.block_rounds, a.budget,
                              a.block_runs, min(5, a.block_runs))
        self.log(f"timing {spec.label} batch {batch}, blocks of {runs} runs x {a.block_rounds} rounds "
                 f"(onnxruntime spinning on, OpenVINO pinned): {', '.join(block)}")
        samples = blocks({n: c.call for n, c in block.items()}, runs, a.block_rounds)
        return {**{n: summary(v) for n, v in samples.items()}, "_runs_per_block": runs, "_rounds": a.block_rounds}

    # -- part: batching --------------------------------------------------------------------
    def batching(self, name) -> dict:
        a = self.args
        b1, b8 = self.compiled(name, 1, "fp32"), self.compiled(name, 8, "fp32")
        result = cross_request_batching.measure(b1["executable"], b8["executable"], self.specs[name].inputs(1),
                                                a.clients, a.requests, a.rounds, a.batching_timeout_us)
        result["_model"] = self.specs[name].label
        return result

    # -- part: memory ----------------------------------------------------------------------
    def memory(self, names: List[str], batches: List[int]) -> List[dict]:
        rows = []
        for name in names:
            for batch in batches:
                for kind, precision in (("modelrunner", "fp32"), ("modelrunner", "fp16"), ("onnxruntime", "fp32")):
                    c = self.compiled(name, batch, precision)
                    path = c["popef_path"] if kind == "modelrunner" else c["onnx_path"]
                    self.log(f"memory probe: {kind} {self.specs[name].label} batch {batch} {precision}")
                    probe = memory_probe.run_probe(kind, path, self.threads)
                    rows.append({"model": name, "label": self.specs[name].label, "batch": batch,
                                 "precision": precision, "runtime": kind, "file_mb": os.path.getsize(path) / 2 ** 20,
                                 **probe})
        return rows

    # -- part: profile ---------------------------------------------------------------------
    def profile(self, names: List[str], batches: List[int]) -> List[dict]:
        from tf_popef_op.runtime import ModelRunner
        if not hasattr(ModelRunner, "profile"):
            self.log("profile part skipped: this runtime has no per-op profiler (ModelRunner.profile)")
            return []
        rows = []
        for name in names:
            for batch in batches:
                try:
                    rows.append(self._profile_row(name, batch))
                except Exception as e:  # the latency part's failure row already names it; so does this row
                    rows.append({"model": name, "label": self.specs[name].label, "batch": batch, "precision": "fp32",
                                 "failed": error_line(e)})
        return rows

    def _profile_row(self, name, batch) -> dict:
        x = self.specs[name].inputs(batch)
        c = self.compiled(name, batch, "fp32")
        self.log(f"per-op profiles: {self.specs[name].label} batch {batch} fp32")
        ours = op_profiles.modelrunner_by_op(c["executable"], x, self.args.profile_iters, c["converted"])
        # the peers' kernels charged to the class of the step of ours computing their nodes
        charging = op_profiles.Charging(c["standard"], ours)
        peers = {"onnxruntime": op_profiles.onnxruntime_by_op(c["standard"], x, self.threads, self.args.profile_iters,
                                                              charging)}
        try:
            peers["OpenVINO"] = op_profiles.openvino_by_op(c["onnx_path"], c["standard"], x, self.threads,
                                                           self.args.profile_iters, charging)
        except Exception as e:  # OpenVINO may not compile every model: the row says so
            self.log(f"  OpenVINO profile failed: {type(e).__name__}: {e}")
            peers["OpenVINO"] = {"error": error_line(e, 300)}
        classes = op_classes.compare(ours["by_class_us"],
                                     {p: v["by_class_us"] for p, v in peers.items() if "by_class_us" in v},
                                     peer_verdict.OP_CLASS_LIMIT, peer_verdict.OP_CLASS_MIN_SHARE)
        return {"model": name, "label": self.specs[name].label, "batch": batch, "precision": "fp32",
                "ours": ours, **peers, "classes": classes}
