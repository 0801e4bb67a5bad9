"""The docs stay usable: every link into a document and its sections resolves, the benchmarks page
covers every benchmark script, and the docs describe the product rather than its history."""
import collections
import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"(#{1,6})\s+(.*?)\s*#*\s*$")
# History belongs to git: no session or issue numbers in what describes the product.
NARRATION = re.compile(r"\bsession[ -]?[0-9]|\bissue ?#?[0-9]", re.IGNORECASE)


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def heading_anchors(markdown):
    """GitHub's anchors: lowercase, punctuation other than - and _ dropped, spaces to -, a
    repeated heading gets -1, -2... Headings inside code fences do not count."""
    anchors, seen, in_fence = set(), collections.Counter(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        match = None if in_fence else HEADING.match(line)
        if match:
            slug = re.sub(r"[^\w\- ]", "", match.group(2).lower()).replace(" ", "-")
            anchors.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
            seen[slug] += 1
    return anchors


def local_links(rel):
    """(target file relative to ROOT, anchor or None) of every link that is not a URL."""
    for target in LINK.findall(read(rel)):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = rel if not path else os.path.normpath(os.path.join(os.path.dirname(rel), path))
        yield resolved, anchor or None


@pytest.mark.parametrize("doc", DOCS)
def test_links_resolve_to_files_and_headings(doc):
    broken = []
    for target, anchor in local_links(doc):
        if not os.path.exists(os.path.join(ROOT, target)):
            broken.append(f"{target} (no such file)")
        elif anchor is not None and anchor not in heading_anchors(read(target)):
            broken.append(f"{target}#{anchor} (no such heading)")
    assert not broken, f"{doc}: broken links: {broken}"


def test_heading_anchors_follow_github_rules():
    markdown = ("# Blocked layout (NCHW8c)\n## MLP: ModelRunner vs onnxruntime\n### Where the time goes\n"
                "### Where the time goes\n```bash\n# a comment, not a heading\n```\n")
    assert heading_anchors(markdown) == {"blocked-layout-nchw8c", "mlp-modelrunner-vs-onnxruntime",
                                         "where-the-time-goes", "where-the-time-goes-1"}


def test_benchmarks_page_covers_every_benchmark_script():
    page = read("docs/benchmarks.md")
    scripts = [os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "benchmarks", "bench_*.py"))]
    assert scripts
    assert [s for s in scripts if s not in page] == []


def _product_sources():
    """Every source, test, manifest and script of the product (this file excepted: it names
    the pattern)."""
    found = []
    for folder in ("benchmarks", "compiler", "popef", "serving", "tf_popef_op", "tests",
                   "deploy", "examples"):
        for directory, _, names in os.walk(os.path.join(ROOT, folder)):
            found += [os.path.relpath(os.path.join(directory, n), ROOT) for n in names
                      if n.endswith((".py", ".cc", ".h", ".inc", ".yaml", ".sh", ".md"))]
    return sorted(p for p in found if p != os.path.relpath(__file__, ROOT))


@pytest.mark.parametrize("path", DOCS + ["Makefile", "Dockerfile"] + _product_sources())
def test_no_history_narration(path):
    lines = [f"{n}: {line.strip()}" for n, line in enumerate(read(path).splitlines(), 1) if NARRATION.search(line)]
    assert not lines, f"{path} narrates history (it belongs in git): {lines}"
