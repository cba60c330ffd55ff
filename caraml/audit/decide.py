"""A row's audit state, decided once, which caraml-check prints and
caraml-compare ranks by:

- audited: its raw evidence is all there, every figure it states is its
  recomputation within TOLERANCE, its stated verdict is today's verdict on
  those figures, and it breaks no bound;
- refused: it breaks one of those rules; each finding names the rule and
  its evidence (the field, the stated and the recomputed value);
- unaudited: it has no raw evidence (a run made before the suite kept it,
  a row written by hand), and breaks no rule its record alone can break
  (a bound, or a verdict its own figures contradict). Ranked only where
  the reader accepts unaudited rows, and said so wherever it is.

Whether a row claims a measurement is the verdict's (caraml/row/verdict.py),
made again on the figures made again."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from caraml.audit import bounds, identity, recompute
from caraml.audit.evidence import Evidence, read
from caraml.audit.findings import RECOMPUTED, TOLERANCE, VERDICT, Finding
from caraml.audit.identity import Identity
from caraml.row.record import Row
from caraml.row.verdict import judged

AUDITED, REFUSED, UNAUDITED = "audited", "refused", "unaudited"
STATES = (AUDITED, REFUSED, UNAUDITED)


@dataclass(frozen=True)
class Audit:
    """One row's audit: its row (as read, judged by today's verdict), its
    state, what it breaks, what of its evidence is missing, its identity."""

    row: Row
    state: str
    findings: tuple[Finding, ...]
    missing: str
    identity: Identity
    row_file: Path
    # whether the row as written claims to be a measurement
    claims: bool

    @property
    def why(self) -> str:
        """The state in one line: each finding of a refused row, what an unaudited one lacks."""
        if self.state == REFUSED:
            return "; ".join(map(str, self.findings))
        return self.missing if self.state == UNAUDITED else ""

    def ranked(self, accept_unaudited: bool) -> bool:
        """Whether a ranking may take the row (its own verdict aside)."""
        return self.state == AUDITED or (self.state == UNAUDITED and accept_unaudited)


def _shown(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _differs(stated: object, found: object) -> bool:
    if isinstance(stated, dict) or isinstance(found, dict):
        said = stated if isinstance(stated, dict) else {}
        again = found if isinstance(found, dict) else {}
        return set(said) != set(again) or any(_differs(said[k], again[k]) for k in said)
    if not isinstance(stated, (int, float)) or not isinstance(found, (int, float)) \
            or isinstance(stated, bool) or isinstance(found, bool):
        if stated is None or found is None:
            return stated is not None  # a figure the evidence does not give; none stated claims none
        return stated != found
    a, b = float(stated), float(found)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) != math.isnan(b)
    return abs(a - b) > TOLERANCE * max(abs(b), 1e-12)


def compared(row: Row, figures: dict) -> list[Finding]:
    """Each stated figure that its recomputation does not give."""
    out = []
    for name, found in figures.items():
        stated = getattr(row, name)
        if _differs(stated, found):
            off = ""
            if isinstance(stated, (int, float)) and isinstance(found, (int, float)) and found \
                    and not isinstance(stated, bool):
                off = f" ({100 * (float(stated) - float(found)) / abs(float(found)):+.1f} %)"
            again = _shown(found) if found is not None else "none (no raw evidence of it)"
            out.append(Finding(RECOMPUTED, f"{name}: stated {_shown(stated)}, recomputed {again}{off}"))
    return out


def _claims(ev: Evidence) -> bool:
    """Whether the row as written claims a measurement (a caraml-row/1 file: its verdict as read)."""
    stated = ev.stated.get("measurement")
    return bool(stated) if stated is not None else ev.row.measurement


def _verdict(ev: Evidence, row: Row) -> list[Finding]:
    """The stated verdict against today's verdict on the row's figures (made again where it has evidence)."""
    claims, today = _claims(ev), judged(row)
    if claims and not today.measurement:
        return [Finding(VERDICT, f"stated a measurement; its figures are none ({today.not_a_measurement})")]
    if not claims and today.measurement and "measurement" in ev.stated:
        return [Finding(VERDICT, "stated no measurement; its figures are one")]
    return []


def audit(ev: Evidence) -> Audit:
    """The row's audit, decided once."""
    if ev.missing:
        findings = _verdict(ev, ev.row) + bounds.check(ev.row, {}, None, None)
        state = REFUSED if findings else UNAUDITED
        return Audit(ev.row, state, tuple(findings), ev.missing, identity.of(ev), ev.row_file, _claims(ev))
    again = recompute.figures(ev)
    remade = dataclasses.replace(ev.row, **again.figures)
    findings = (again.findings + compared(ev.row, again.figures) + _verdict(ev, remade)
                + bounds.check(ev.row, again.figures, again.flops_per_work, ev))
    return Audit(ev.row, REFUSED if findings else AUDITED, tuple(findings), "", identity.of(ev), ev.row_file,
                 _claims(ev))


def audit_file(row_file: Path) -> Audit:
    """The audit of the row in row_file (ValueError where the file holds no row)."""
    return audit(read(row_file))
