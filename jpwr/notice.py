"""Messages for the person running the job. They go to stderr, one line each,
so they never mix with the measured command's stdout that result tables parse.

They go through the standard `logging` module (logger "jpwr"): a message
that starts with `error:` or `warning:` at that level, any other (a note,
the total) at INFO, details at DEBUG. The level is -q (WARNING), -v
(DEBUG) or the environment's JPWR_LOG_LEVEL, else CARAML_LOG_LEVEL (the
suite's, where jpwr runs inside it), else INFO; the lines jpwr prints on
stdout for others to read (`jpwr-summary:` ...) are data, shown at every
level."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

LOG = logging.getLogger("jpwr")
LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARNING": logging.WARNING,
          "ERROR": logging.ERROR}
ENV = ("JPWR_LOG_LEVEL", "CARAML_LOG_LEVEL")


class _Stderr(logging.Handler):
    """One line on whatever stderr is now (a test's, a redirected one)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(self.format(record), file=sys.stderr, flush=True)


def add_level_options(parser: argparse.ArgumentParser, variables: Sequence[str] = ENV) -> None:
    """-q and -v, the level a command says things at."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", action="store_true",
                       help=f"only warnings and errors (also {variables[0]}=WARNING)")
    group.add_argument("-v", "--verbose", action="store_true",
                       help=f"details too (also {variables[0]}=DEBUG)")


def chosen_level(quiet: bool = False, verbose: bool = False, environ: Mapping[str, str] = os.environ,
                 variables: Sequence[str] = ENV) -> int:
    """The level -q or -v asks for, else the first of the variables that is
    set (a name or a number), else INFO; ValueError naming a value that is
    no level."""
    if quiet:
        return logging.WARNING
    if verbose:
        return logging.DEBUG
    for variable in variables:
        given = environ.get(variable, "").strip()
        if not given:
            continue
        if given.upper() in LEVELS:
            return LEVELS[given.upper()]
        if given.isdigit():
            return int(given)
        raise ValueError(f"{variable}={given} is no log level: give one of {' '.join(LEVELS)} "
                         "(or -q, -v)")
    return logging.INFO


@contextmanager
def level_kept(logger: logging.Logger) -> Iterator[None]:
    """A command's level for its own run only: the logger's is back after it
    (a caller in the same process, a test, keeps its own)."""
    previous = logger.level
    try:
        yield
    finally:
        logger.setLevel(previous)


def _level_at_import() -> int:
    try:
        return chosen_level()
    except ValueError:
        return logging.INFO  # a command that reads the variable names the bad value


if not LOG.handlers:
    _handler = _Stderr()
    _handler.setFormatter(logging.Formatter("jpwr: %(message)s"))
    LOG.addHandler(_handler)
    LOG.propagate = False
    LOG.setLevel(_level_at_import())


def say(message: str) -> None:
    """A message at the level its first word names (error:, warning:), else INFO."""
    level = logging.ERROR if message.startswith("error:") else \
        logging.WARNING if message.startswith("warning:") else logging.INFO
    LOG.log(level, message)


def detail(message: str) -> None:
    """What -v adds: how jpwr went about it."""
    LOG.debug(message)


def one_line(err: BaseException) -> str:
    """An exception as one short line (vendor errors can span several)."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 200 else text[:197] + "..."
