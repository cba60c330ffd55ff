"""The commands that README.md, docs/*.md and jpwr/README.md show in their
code blocks, as a user would copy them.

A code block is an indented block after a blank line or a fenced block
marked bash/sh/console. A command is a line that starts with a command word
(or `NAME=value` assignments before one, or a bare assignment); a line
ending in `\\` goes on on the next; a `while`/`if`/`for` statement runs to
its `done`/`fi` and is one command. In a block with `$ ` prompts only the
prompted lines are commands (the rest is their output). A block that starts
with `#!` is the listing of a script, not something to type. A trailing
` # comment` is not part of the command.

Tests that run a documented command as written take its text from here
(`commands_in(doc, start)`), so that a change of the doc changes what they
run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "docs/*.md", "jpwr/README.md")

COMMAND_WORDS = {
    "jube", "bash", "source", "python", "python3", ".venv/bin/python", "caraml-compare",
    "reframe", "torchrun", "srun", "sbatch", "scontrol", "export", "uv", "pip", "jpwr",
    "git", "sqlite3", "cd", "mpirun", "caraml-bundle", "caraml-check",
}
COMPOUND = {"while": "done", "until": "done", "for": "done", "if": "fi"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=[^\s,()]*$")
FENCED_SHELL = {"bash", "sh", "shell", "console"}


@dataclass(frozen=True)
class Command:
    doc: str      # path relative to the checkout
    line: int     # first line of the command in the doc
    text: str     # normalized: continuations joined, comment and prompt dropped

    def __str__(self):
        return f"{self.doc}:{self.line}: {self.text}"


def doc_files() -> list[Path]:
    files = []
    for pattern in DOCS:
        files.extend(sorted(ROOT.glob(pattern)))
    return files


def _blocks(lines):
    """(first line number, lines) of each code block, fenced or indented."""
    block, start, fence, prev_blank = [], 0, None, True
    for number, line in enumerate(lines, 1):
        if fence is not None:
            if line.startswith("```"):
                if fence in FENCED_SHELL:
                    yield start, block
                block, fence = [], None
            else:
                block.append(line)
            continue
        if line.startswith("```"):
            if block:
                yield start, block
            block, start, fence = [], number + 1, line[3:].strip()
            continue
        indented = line.startswith("    ")
        if indented and (block or prev_blank):
            if not block:
                start = number
            block.append(line)
        elif line.strip() and block:
            yield start, block
            block = []
        elif not line.strip() and block:
            block.append(line)
        prev_blank = not line.strip()
    if block and fence is None:
        yield start, block


def _strip_comment(line: str) -> str:
    """The line without a trailing ` # comment` outside quotes."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def _first_word(text: str) -> str:
    words = text.split()
    while words and ASSIGNMENT.match(words[0]) and len(words) > 1:
        words = words[1:]
    return words[0] if words else ""


def _is_command(text: str) -> bool:
    word = _first_word(text)
    bare_assignment = len(text.split()) == 1 and ASSIGNMENT.match(word)
    return word in COMMAND_WORDS or word in COMPOUND or bool(bare_assignment)


def _commands(lines):
    """(offset, text) of each command in one block's lines."""
    prompted = any(line.strip().startswith("$ ") for line in lines)
    i = 0
    while i < len(lines):
        offset, raw = i, lines[i].strip()
        i += 1
        if prompted:
            if not raw.startswith("$ "):
                continue
            raw = raw[2:]
        text = _strip_comment(raw)
        while text.endswith("\\") and i < len(lines):
            text = text[:-1].rstrip() + " " + _strip_comment(lines[i].strip())
            i += 1
        if not text or not (prompted or _is_command(text)):
            continue
        closing = COMPOUND.get(text.split()[0])
        if closing:
            body = [text]
            while i < len(lines) and body[-1].split()[:1] != [closing]:
                body.append(_strip_comment(lines[i].strip()))
                i += 1
            text = "\n".join(body)
        yield offset, "\n".join(" ".join(part.split()) for part in text.split("\n"))


def documented_commands() -> list[Command]:
    """Every command of the docs, in the order they appear."""
    found = []
    for path in doc_files():
        lines = path.read_text().splitlines()
        for start, block in _blocks(lines):
            if block[0].lstrip().startswith("#!"):
                continue   # a script's listing
            for offset, text in _commands(block):
                found.append(Command(str(path.relative_to(ROOT)), start + offset, text))
    return found


def commands_in(doc: str, start: str) -> list[str]:
    """The commands of one doc that start with `start`, as written there."""
    return [c.text for c in documented_commands() if c.doc == doc and c.text.startswith(start)]
