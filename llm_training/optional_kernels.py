"""Transformer Engine and Apex, the optional kernel packages megatron-core
uses where they import. megatron-core probes them at its own import and
catches only a missing package, so an installed one that fails to import
(built against another torch or CUDA: an undefined symbol, a missing
library) stops `import megatron.core` altogether. Imported before
megatron-core, this module tries each once and hides a broken one
(None in sys.modules makes its import raise ModuleNotFoundError), so
megatron-core and the suite treat it as absent and take their local
implementations, with a warning that names the cause."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings

PACKAGES = ("transformer_engine", "apex")


def hide_broken(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """{package: why it is hidden} for the installed packages that fail to import."""
    hidden = {}
    for name in names:
        if name in sys.modules or importlib.util.find_spec(name) is None:
            continue
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - any failure: TE raises OSError, ImportError, RuntimeError
            sys.modules[name] = None
            hidden[name] = f"{type(e).__name__}: {e}".splitlines()[0]
            warnings.warn(f"{name} is installed but does not import ({hidden[name]}); "
                          f"megatron-core's local implementations are used instead", stacklevel=2)
    return hidden


HIDDEN = hide_broken()
