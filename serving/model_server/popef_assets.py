"""Opens every PopEF file a SavedModel version uses with the runtime while the version loads,
so a missing, truncated or corrupt PopEF fails the load (the version goes to END with the
runtime's error) instead of failing every request after the version became AVAILABLE.

Which assets are PopEF files: in a SavedModel whose graph has PopefExecute nodes, every asset
(`asset_file_def`) named `*.popef` or starting with the PopEF magic; every asset of such a
model must exist. The PopefExecute kernels open their runner on first use; the warm-up
requests (written for every signature by serving.export) exercise those.
"""
import os

import grpc

from serving.model_server.errors import ServingError, not_found

POPEF_OP = "PopefExecute"
POPEF_SUFFIX = ".popef"
POPEF_MAGIC = b"POPEFBLB"


def uses_popef(meta_graph) -> bool:
    graph = meta_graph.graph_def
    if any(node.op == POPEF_OP for node in graph.node):
        return True
    return any(node.op == POPEF_OP for function in graph.library.function
               for node in function.node_def)


def _is_popef(path: str) -> bool:
    if path.endswith(POPEF_SUFFIX):
        return True
    with open(path, "rb") as handle:
        return handle.read(len(POPEF_MAGIC)) == POPEF_MAGIC


def popef_asset_paths(meta_graph, version_dir: str):
    """The PopEF files of a local version directory; raises NOT_FOUND for a missing asset."""
    paths = []
    for asset in meta_graph.asset_file_def:
        path = os.path.join(version_dir, "assets", asset.filename)
        if not os.path.isfile(path):
            raise not_found(f"{path}: asset '{asset.filename}' listed in saved_model.pb is "
                            "missing")
        if _is_popef(path):
            paths.append(path)
    return paths


def open_popef_assets(meta_graph, version_dir: str) -> None:
    """Opens (and closes) each PopEF of the version with the runtime. Raises ServingError
    with the runtime's code and message, which names the file (DATA_LOSS for a truncated
    file, INVALID_ARGUMENT for one that is not a PopEF, ...)."""
    from tf_popef_op import runtime
    for path in popef_asset_paths(meta_graph, version_dir):
        try:
            with runtime.ModelRunner(path):
                pass
        except runtime.Error as error:
            code = getattr(grpc.StatusCode, error.code, grpc.StatusCode.INTERNAL)
            raise ServingError(code, error.message) from None
