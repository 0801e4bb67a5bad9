"""Local copies of model versions that live on non-local file systems.

The runtime memory-maps PopEF files, which needs a local file: a version under `ram://`,
`gs://`, `s3://`... is copied (through `tf.io.gfile`) into a temporary directory owned by
its servable and removed when the servable unloads. Local paths and `file://` URIs are used
in place.
"""
import logging
import os
import shutil
import tempfile

from serving.model_server.version_source import join

LOCAL_SCHEMES = ("", "file")
log = logging.getLogger("popef_model_server")


def is_local(path: str) -> bool:
    scheme = path.split("://", 1)[0] if "://" in path else ""
    return scheme in LOCAL_SCHEMES


class LocalVersion:
    """`path` is a local directory holding the version; `remove()` deletes it if it is a copy."""

    def __init__(self, source: str):
        self.source = source
        self.copied = not is_local(source)
        if not self.copied:
            self.path = source[len("file://"):] if source.startswith("file://") else source
            return
        self.path = tempfile.mkdtemp(prefix="popef-serving-")
        try:
            _copy_tree(source, self.path)
        except BaseException:
            self.remove()
            raise
        log.info("Copied %s to the local directory %s (the runtime maps local files only)",
                 source, self.path)

    def remove(self) -> None:
        if self.copied and self.path and os.path.isdir(self.path):
            shutil.rmtree(self.path, ignore_errors=True)


def _copy_tree(source: str, target: str) -> None:
    import tensorflow as tf
    for directory, _, names in tf.io.gfile.walk(source):
        relative = directory[len(source):].lstrip("/")
        local_dir = os.path.join(target, relative)
        os.makedirs(local_dir, exist_ok=True)
        for name in names:
            path = join(directory, name)
            # TF's ram:// listing also names siblings sharing the prefix ("assets" lists
            # ".extra" of "assets.extra"): copy only what exists.
            if tf.io.gfile.exists(path):
                tf.io.gfile.copy(path, os.path.join(local_dir, name), overwrite=True)
