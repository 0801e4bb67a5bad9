"""popef_dump: print what a PopEF file holds.

    popef_dump FILE [--json]
    python -m popef.dump FILE [--json]

Sections: file summary, Metadata, Anchors, Programs, TensorData, Opaques. --json prints one
JSON document with the same content. Unreadable files print one error line and exit 1.
"""
import argparse
import json
import os
import sys
from typing import List, Optional

from popef.format import BlobType, PopefError
from popef.reader import PopefFile


def describe(popef: PopefFile) -> dict:
    """Everything the dump shows, as plain JSON-able data."""
    doc = {
        "file": popef.source,
        "size": len(popef.data),
        "blobs": [{"index": i, "type": b.type.label, "name": b.name, "offset": b.offset,
                   "payload_offset": b.payload_offset, "payload_size": len(b.payload),
                   "version": f"{b.version[0]}.{b.version[1]}"} for i, b in enumerate(popef.blobs)],
    }
    doc["version"] = doc["blobs"][0]["version"] if doc["blobs"] else None
    kinds = {b.type for b in popef.blobs}
    metadata = popef.metadata if BlobType.METADATA in kinds else None
    executable = popef.executable if BlobType.EXECUTABLE in kinds else None
    doc["metadata"] = None if metadata is None else {k: v for k, v in metadata.items()
                                                     if k not in ("anchors", "tensor_data")}
    doc["anchors"] = [] if metadata is None else metadata.get("anchors", [])
    doc["programs"] = {} if executable is None else _programs(executable)
    doc["subgraphs"] = [] if executable is None else executable.get("subgraphs", [])
    doc["tensor_data"] = _tensor_data(popef, metadata, executable)
    doc["opaques"] = [_opaque(b.name, bytes(b.payload)) for b in popef.blobs if b.type == BlobType.OPAQUE]
    return doc


def _programs(executable: dict) -> dict:
    names = {t.get("id"): t.get("name", f"#{t.get('id')}") for t in executable.get("tensors", [])}
    out = {}
    for program, steps in executable.get("programs", {}).items():
        rendered = []
        for step in steps:
            step = dict(step)
            for key in ("inputs", "outputs"):
                if key in step:
                    step[f"{key}_names"] = [names.get(i, f"#{i}") for i in step[key]]
            for key in ("cond", "trip_count"):  # If/Loop control tensors (-1: none)
                if isinstance(step.get(key), int) and step[key] >= 0:
                    step[f"{key}_name"] = names.get(step[key], f"#{step[key]}")
            rendered.append(step)
        out[program] = rendered
    return out


def _tensor_data(popef: PopefFile, metadata: Optional[dict], executable: Optional[dict]) -> List[dict]:
    table = {t.get("name"): t for t in (metadata or {}).get("tensor_data", [])}
    loads = {s.get("tensor_data"): s.get("offset") for s in (executable or {}).get("programs", {}).get("load", [])}
    rows = []
    for b in popef.blobs:
        if b.type != BlobType.TENSOR_DATA:
            continue
        info = table.get(b.name, {})
        rows.append({"name": b.name, "dtype": info.get("dtype"), "shape": info.get("shape"),
                     "nbytes": len(b.payload), "offset": loads.get(b.name), "file_offset": b.payload_offset})
    return rows


def _opaque(name: str, payload: bytes) -> dict:
    try:
        content = json.loads(payload.decode("utf-8"))
        return {"name": name, "size": len(payload), "json": content}
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {"name": name, "size": len(payload), "json": None}


def _count(n) -> str:
    return f"{n:,}" if isinstance(n, int) else "?"


def _shape(shape) -> str:
    return "?" if shape is None else "[" + ", ".join(str(d) for d in shape) + "]"


def _table(rows: List[List[str]], header: List[str]) -> List[str]:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    fmt = lambda r: "  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return [fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def render_text(doc: dict) -> str:
    lines = [f"PopEF file: {doc['file']}",
             f"  size: {doc['size']:,} bytes, {len(doc['blobs'])} blobs, format version {doc['version']}"]
    lines += _table([[b["index"], b["type"], b["name"], f"{b['offset']:,}", f"{b['payload_size']:,}"]
                     for b in doc["blobs"]], ["#", "type", "name", "offset", "payload bytes"])
    lines.append("")
    md = doc["metadata"]
    lines.append("Metadata:" if md is not None else "Metadata: (no Metadata blob)")
    if md is not None:
        mem = md.get("device_memory", {})
        for label, value in (("producer", md.get("producer")), ("ipu version", md.get("ipu_version")),
                             ("num IPUs", md.get("num_ipus")), ("replication factor", md.get("replication_factor")),
                             ("inference", md.get("is_inference")), ("batch size", md.get("batch_size")),
                             ("batch axis", md.get("batch_axis")),
                             ("program flow", "; ".join(f"{k}: {', '.join(v)}"
                                                        for k, v in (md.get("program_flow") or {}).items()))):
            lines.append(f"  {label}: {value}")
        if mem:
            lines.append(f"  device memory: weights {mem.get('weights_bytes', 0):,} + arena "
                         f"{mem.get('arena_bytes', 0):,} = {mem.get('total_bytes', 0):,} bytes")
    lines.append("")
    lines.append(f"Anchors ({len(doc['anchors'])}):")
    if doc["anchors"]:
        lines += _table([[a.get("name"), a.get("direction"), a.get("dtype"), _shape(a.get("shape")),
                          "shared" if a.get("subgraph") is None else a.get("subgraph"), a.get("batch_axis"),
                          ", ".join(a.get("aliases") or [])] for a in doc["anchors"]],
                        ["name", "direction", "dtype", "shape", "subgraph", "batch axis", "aliases"])
    lines.append("")
    lines.append("Programs:" if doc["programs"] else "Programs: (no Executable blob)")
    for name, steps in doc["programs"].items():
        lines.append(f"  {name} ({len(steps)} step{'' if len(steps) == 1 else 's'})")
        for i, step in enumerate(steps):
            lines.append(f"    [{i}] {_step_text(step)}")
    for sg in doc["subgraphs"]:
        lines.append(f"  subgraph {sg.get('index')} '{sg.get('name')}': program {sg.get('program')}, batch size "
                     f"{sg.get('batch_size')} (axis {sg.get('batch_axis')}), inputs {', '.join(sg.get('inputs', []))}"
                     f" -> outputs {', '.join(sg.get('outputs', []))}")
    lines.append("")
    lines.append(f"TensorData ({len(doc['tensor_data'])}):")
    if doc["tensor_data"]:
        lines += _table([[t["name"], t["dtype"] or "?", _shape(t["shape"]), f"{t['nbytes']:,}",
                          "-" if t["offset"] is None else f"{t['offset']:,}"] for t in doc["tensor_data"]],
                        ["name", "dtype", "shape", "bytes", "offset"])
    lines.append("")
    lines.append(f"Opaques ({len(doc['opaques'])}):")
    for o in doc["opaques"]:
        fusion = _fusion_lines(o["json"]) if o["name"] == "fusion" else None
        if fusion is not None:
            lines.append(f"  {o['name']} ({o['size']:,} bytes): {fusion[0]}")
            lines += fusion[1:]
        elif o["json"] is not None:
            lines.append(f"  {o['name']} ({o['size']:,} bytes)")
            lines += ["    " + line for line in json.dumps(o["json"], indent=2).splitlines()]
        else:
            lines.append(f"  {o['name']} ({o['size']:,} bytes)")
            lines.append("    (not JSON)")
    return "\n".join(lines) + "\n"


def _fusion_lines(fusion) -> Optional[List[str]]:
    """The model fusion map (compiler/fusion/fusion_map.py) as two tables: the subgraphs, and
    each fused anchor with its original name. None if the blob does not have that layout (then
    it is shown as JSON)."""
    try:
        index = fusion["index_anchor"]
        subgraphs = fusion["subgraphs"]
        title = (f"model fusion map, {len(subgraphs)} subgraph{'' if len(subgraphs) == 1 else 's'} selected by "
                 f"input '{index['name']}' ({index['dtype']} {_shape(index.get('shape'))})")
        models = [[sg["index"], sg["name"], sg.get("precision", "?"), sg.get("opset", "?"), sg.get("batch_size", "?"),
                   sg.get("batch_axis", "?"), sg.get("source_model", "?")] for sg in subgraphs]
        anchors = []
        for sg in subgraphs:
            aliases = sg.get("aliases", {})
            for direction in ("inputs", "outputs"):
                for fused, original in sg[direction].items():
                    anchors.append([sg["index"], fused, direction[:-1], original, ", ".join(aliases.get(fused, []))])
    except (KeyError, TypeError, AttributeError):
        return None
    lines = [title]
    lines += ["  " + line for line in _table(models, ["index", "name", "precision", "opset", "batch size",
                                                      "batch axis", "source model"])]
    lines.append("")
    lines += ["  " + line for line in _table(anchors, ["subgraph", "fused anchor", "direction", "original name",
                                                       "aliases"])]
    return lines


def _step_text(step: dict) -> str:
    op = step.get("op")
    if op == "LoadTensorData":
        return (f"LoadTensorData {step.get('tensor_data')} -> weights+{step.get('offset')} "
                f"({_count(step.get('nbytes'))} bytes)")
    if op == "Switch":
        return f"Switch on '{step.get('index_anchor')}': cases {', '.join(step.get('cases', []))}"
    if op == "If":
        return (f"If '{step.get('name', '')}' on '{step.get('cond_name')}': then {step.get('then')}, else "
                f"{step.get('else')} -> {', '.join(step.get('outputs_names', []))}")
    if op == "Loop":
        limits = [f"max_trip_count={step.get('max_trip_count')}"]
        limits += [f"{key}='{step[key + '_name']}'" for key in ("trip_count", "cond") if key + "_name" in step]
        return (f"Loop '{step.get('name', '')}' body {step.get('body')} ({' '.join(limits)}): "
                f"{', '.join(step.get('inputs_names', []))} -> {', '.join(step.get('outputs_names', []))}")
    text = f"{op} '{step.get('name', '')}': {', '.join(step.get('inputs_names', []))} -> " \
           f"{', '.join(step.get('outputs_names', []))}"
    if step.get("attrs"):
        text += "  " + " ".join(f"{k}={json.dumps(v)}" for k, v in step["attrs"].items())
    if "in_place_input" in step:  # output 0 on that input's bytes (docs/popef.md "Arena plan")
        text += f"  in_place_input={step['in_place_input']}"
    return text


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="popef_dump", description="Print the contents of a PopEF file.")
    parser.add_argument("file", help="PopEF file")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    args = parser.parse_args(argv)
    try:
        if not os.path.isfile(args.file):
            raise PopefError(f"{args.file}: file not found" if not os.path.exists(args.file)
                             else f"{args.file}: not a file")
        doc = describe(PopefFile.open(args.file))
    except (PopefError, OSError, UnicodeDecodeError) as e:
        print(f"popef_dump: error: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(doc, indent=2) + "\n" if args.json else render_text(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
