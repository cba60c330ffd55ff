"""The code checks of the README's test command: ruff over the checkout and
mypy over caraml/ and jpwr/, each at the strictness pyproject.toml states
(docs/setup.md, "The code checks"), and every path of the checkout that a
comment, a docstring or a doc names exists."""

from __future__ import annotations

import ast
import hashlib
import io
import os
import re
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _cache_dir() -> Path:
    """mypy's incremental cache, one per checkout and outside it: the user's
    cache folder, else the temporary folder."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    if not os.access(base if base.exists() else base.parent, os.W_OK):
        base = Path(tempfile.gettempdir())
    return base / "caraml-mypy" / hashlib.sha256(str(REPO).encode()).hexdigest()[:16]


def _check(*argv: str) -> None:
    done = subprocess.run([sys.executable, "-m", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, \
        f"{' '.join(argv)} exited with {done.returncode}:\n{done.stdout}{done.stderr}"


def test_ruff_finds_nothing():
    _check("ruff", "check", "--no-cache", ".")


@pytest.mark.xdist_group("mypy")
def test_mypy_finds_nothing():
    _check("mypy", "--cache-dir", str(_cache_dir()))


# A path of the checkout as prose names it: a top-level entry, then a name
# per folder; a word of capitals (NAME), <...>, a glob or a name that ends
# in `_` is a placeholder or a prefix, not a path
_PLACEHOLDER = re.compile(r"(?:^|/)[A-Z][A-Z_]+(?:[/.]|$)|[<>*{}]|_$")


def _tracked(root: Path) -> list[Path]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.split("\0")
    return [root / n for n in names if n and (root / n).is_file()]


def _python_prose(text: str) -> list[tuple[int, str]]:
    """The comments and docstrings of a Python file, each with its first line."""
    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(text).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.body and isinstance(node.body[0], ast.Expr) and \
                isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str):
            found.append((node.body[0].lineno, node.body[0].value.value))
    return found


def _comments(path: Path, text: str) -> list[tuple[int, str]]:
    """What prose a file holds: a doc whole, a script's or a table's comments."""
    if path.suffix == ".py":
        return _python_prose(text)
    if path.suffix == ".md":
        return [(1, text)]
    if path.suffix == ".xml":
        return [(text.count("\n", 0, m.start()) + 1, m.group(0))
                for m in re.finditer(r"<!--.*?-->", text, re.S)]
    return [(n, line[line.index("#"):]) for n, line in enumerate(text.splitlines(), 1) if "#" in line]


PROSE = (".py", ".md", ".xml", ".sh", ".in", ".yaml", ".toml", ".def")


def named_paths(root: Path) -> dict[str, list[str]]:
    """Each path of the checkout that its prose names, with where."""
    tops = sorted((p.name for p in root.iterdir() if not p.name.startswith(".")), key=len, reverse=True)
    pattern = re.compile(r"(?<![\w./$-])((?:%s)(?:/[\w.\-]+)*/?)" % "|".join(map(re.escape, tops)))
    found: dict[str, list[str]] = {}
    for path in _tracked(root):
        # the records of measurements (docs/perf/) name the tree as it was
        if path.suffix not in PROSE or path.relative_to(root).parts[:2] == ("docs", "perf"):
            continue
        for start, prose in _comments(path, path.read_text(errors="replace")):
            for offset, line in enumerate(prose.splitlines()):
                for match in pattern.finditer(line):
                    name = match.group(1).rstrip(".")
                    if "/" in name or "." in name:
                        found.setdefault(name, []).append(f"{path.relative_to(root)}:{start + offset}")
    return found


def _ignored(root: Path, names: list[str]) -> set[str]:
    """Those that are products of a run (a run folder, a cache, a log): git ignores them."""
    asked = [form for name in names for form in (name.rstrip("/"), name.rstrip("/") + "/")]
    said = subprocess.run(["git", "check-ignore", "--no-index", "--stdin", "-z"], cwd=root,
                          input="\0".join(asked), capture_output=True, text=True).stdout.split("\0")
    return {name for name in names if {name.rstrip("/"), name.rstrip("/") + "/"} & set(said)}


def missing_paths(root: Path) -> dict[str, list[str]]:
    named = {name: where for name, where in named_paths(root).items()
             if not _PLACEHOLDER.search(name) and not (root / name).exists()}
    ignored = _ignored(root, list(named))
    return {name: where for name, where in named.items() if name not in ignored}


def test_every_path_that_a_comment_or_doc_names_exists():
    assert missing_paths(REPO) == {}


def test_a_path_that_no_longer_exists_is_found(tmp_path):
    """Comments, docstrings and docs are read alike; code, placeholders and
    what git ignores (a run's products) are not paths of the checkout."""
    (tmp_path / "caraml" / "row").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    (tmp_path / ".gitignore").write_text("*_run/\n")
    (tmp_path / "caraml" / "row" / "decide.py").write_text(
        '"""Decided here, not in caraml/row.py."""\n'
        '# see caraml/row/decide.py and caraml/gone/\n'
        'x = "caraml/not_prose.py"\n')
    (tmp_path / "docs" / "a.md").write_text(
        "`docs/b.md`, `docs/NAME.md`, caraml/x_run/000000, `caraml/row/`\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    assert missing_paths(tmp_path) == {"caraml/row.py": ["caraml/row/decide.py:1"],
                                       "caraml/gone/": ["caraml/row/decide.py:2"],
                                       "docs/b.md": ["docs/a.md:1"]}
