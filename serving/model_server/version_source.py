"""Finds model versions under a base path: numbered sub-directories that hold a SavedModel
(`saved_model.pb`), like TF Serving's FileSystemStoragePathSource, or a bare PopEF
(`*.popef`, Triton's repository layout). Paths go through
`tf.io.gfile`, so any file system TensorFlow supports works (local, `file://`, `ram://`,
`gs://`, ...)."""
import posixpath
from typing import Dict, Tuple

MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
MODEL_CONFIG_FILE = "config.pbtxt"   # Triton's per-model settings, next to the versions


def join(base: str, *parts: str) -> str:
    """Joins path parts with '/' (the separator of every file system URI TF supports)."""
    return posixpath.join(base, *parts)


def versions_on_disk(base_path: str) -> Dict[int, str]:
    """Maps version number to its directory; a missing base path has no versions.

    Directories that are not non-negative integers are ignored (TF Serving logs and skips
    them); a numbered directory still being written (no saved_model.pb yet) is not offered,
    so a copy in progress is picked up on a later poll instead of failing to load.
    """
    import tensorflow as tf
    found = {}
    try:
        entries = tf.io.gfile.listdir(base_path)
    except tf.errors.OpError:   # missing base path, or not a directory
        return found
    for entry in entries:
        entry = entry.rstrip("/")
        if not entry.isdigit():
            continue
        directory = join(base_path, entry)
        if (any(tf.io.gfile.exists(join(directory, name)) for name in MODEL_FILES)
                or tf.io.gfile.glob(join(directory, "*.popef"))):
            found[int(entry)] = directory
    return found


def content_signature(path: str) -> Tuple:
    """What a version holds: (relative path, size, mtime) of every file under its directory,
    and of the model's Triton `config.pbtxt` one level up when there is one. A version that
    failed to load is retried when this changes, so a version whose files were still being
    copied when it was first seen loads once the copy completes."""
    import tensorflow as tf
    files = []

    def add(full, relative):
        try:
            stat = tf.io.gfile.stat(full)
        except tf.errors.OpError:   # removed meanwhile: the next poll sees it
            return
        files.append((relative, stat.length, stat.mtime_nsec))
    try:
        for directory, _, names in tf.io.gfile.walk(path):
            for name in names:
                full = join(directory, name)
                add(full, full[len(path):])
    except tf.errors.OpError:
        return ()
    add(join(posixpath.dirname(path.rstrip("/")), MODEL_CONFIG_FILE), "../" + MODEL_CONFIG_FILE)
    return tuple(sorted(files))
