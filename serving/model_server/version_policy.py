"""Which of the versions found on disk a model should serve (ModelVersionPolicy)."""
from typing import Iterable, List


def aspired_versions(policy, available: Iterable[int]) -> List[int]:
    """TF Serving's ServableVersionPolicy: `latest {num_versions}` (default 1 newest),
    `all {}`, or `specific {versions}` (only those present on disk)."""
    versions = sorted(set(available))
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return versions
    if choice == "specific":
        wanted = set(policy.specific.versions)
        return [v for v in versions if v in wanted]
    count = policy.latest.num_versions if choice == "latest" else 1
    count = count or 1
    return versions[-count:] if versions else []
