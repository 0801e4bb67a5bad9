"""Finds model versions on disk: numbered sub-directories of a base path that hold a
SavedModel (`saved_model.pb`), like TF Serving's FileSystemStoragePathSource, or a bare PopEF
(`*.popef`, Triton's repository layout)."""
import os
from typing import Dict

from serving.model_server.popef_version import is_bare_popef


def versions_on_disk(base_path: str) -> Dict[int, str]:
    """Maps version number to its directory; a missing base path has no versions.

    Directories that are not non-negative integers are ignored (TF Serving logs and skips
    them); a numbered directory still being written (no saved_model.pb yet) is not offered,
    so a copy in progress is picked up on a later poll instead of failing to load.
    """
    found = {}
    try:
        entries = os.listdir(base_path)
    except (FileNotFoundError, NotADirectoryError):
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        directory = os.path.join(base_path, entry)
        if os.path.isfile(os.path.join(directory, "saved_model.pb")) or os.path.isfile(
                os.path.join(directory, "saved_model.pbtxt")) or is_bare_popef(directory):
            found[int(entry)] = directory
    return found
