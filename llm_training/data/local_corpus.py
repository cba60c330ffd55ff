"""A real English-text corpus that every host with Python has: the
docstrings of the standard library, one document per module. It is read
from the sources with `ast` rather than by importing the modules, so no
module's import side effects run, and the result depends only on the
Python installation (1.9 MB in 645 documents for CPython 3.11.7).

This is not OSCAR: a dataset made from it is named `local-pydoc-...`."""

from __future__ import annotations

import ast
import json
import platform
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from caraml.node.files import write_whole
from caraml.report import BenchmarkInputError

# Test suites are mostly code and fixtures, not prose; installed packages
# differ from host to host.
_SKIPPED_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}
_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
# Only statements can hold a class or function; skipping expressions makes
# the walk several times faster.
_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


def corpus_path(out_dir: Path) -> Path:
    return out_dir / f"local-pydoc-py{platform.python_version()}.jsonl"


def build_local_corpus(out_dir: Path, stdlib: Path | None = None) -> Path:
    """Writes the corpus as jsonl ({"module", "text"} per line) unless it is
    already there; returns its path."""
    path = corpus_path(out_dir)
    if path.exists():
        return path
    stdlib = Path(stdlib or sysconfig.get_paths()["stdlib"])
    records = [{"module": name, "text": text} for name, text in _module_docs(stdlib)]
    if not records:
        raise BenchmarkInputError(
            f"no Python sources with docstrings under {stdlib} to build the local corpus from; "
            "pass a corpus file with --corpus PATH")
    write_whole(path, "".join(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
                              for record in records).encode("utf-8"))
    return path


def _module_docs(stdlib: Path) -> Iterator[tuple[str, str]]:
    sources = sorted(p.relative_to(stdlib) for p in stdlib.rglob("*.py"))
    for rel in sources:
        if _SKIPPED_DIRS.intersection(rel.parts[:-1]):
            continue
        try:
            tree = ast.parse((stdlib / rel).read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue  # a few files are deliberately broken fixtures or unreadable
        docs = list(_docstrings(tree))
        if docs:
            yield _module_name(rel), "\n\n".join(docs)


def _docstrings(tree: ast.AST) -> Iterator[str]:
    """Docstrings in source order (depth first, iteratively, so that no
    nesting depth can reach Python's recursion limit)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, _DOCUMENTED) and (doc := ast.get_docstring(node)):
            yield doc
        children = [c for c in ast.iter_child_nodes(node) if isinstance(c, _STATEMENTS)]
        stack.extend(reversed(children))


def _module_name(rel: Path) -> str:
    parts = rel.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
