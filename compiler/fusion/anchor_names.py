"""Anchor names of a fused executable, as PopRT's model fusion names them: the `index` input
selects the subgraph; model i's k-th graph input is `graph{i}/stream{k}` (its original name
`graph{i}/{name}` is an alias) and its output `name` is `graph{i}/{name}`. The names do not
depend on the entry's `name:` (that names the subgraph only)."""
from compiler.popef_writer import IndexAnchor

# int32 [1]: the runtime accepts any integer dtype, shape [] or [1].
INDEX_ANCHOR = IndexAnchor("index", "int32", (1,))


def subgraph_prefix(index: int) -> str:
    return f"graph{index}/"


def input_anchor(index: int, position: int) -> str:
    return f"{subgraph_prefix(index)}stream{position}"


def input_alias(index: int, original: str) -> str:
    return f"{subgraph_prefix(index)}{original}"


def output_anchor(index: int, original: str) -> str:
    return f"{subgraph_prefix(index)}{original}"
