"""Graphcore IPUs through gcipuinfo (ships with the Poplar SDK). The library
reports each IPU's power as text such as "98.3W", or "N/A" where an IPU has
no own sensor; that becomes NaN for the IPU concerned, never a shifted list.
No hardware energy counter is available."""

from __future__ import annotations

import importlib

from jpwr.method import Channel, Method, MethodUnavailable, import_binding
from jpwr.notice import one_line


def watts(text: str) -> float:
    text = str(text).strip()
    if not text.upper().endswith("W"):
        raise ValueError(f"IPU power reads {text!r}")
    return float(text[:-1])


class IpuPower(Method):
    name = "gc"

    def __init__(self) -> None:
        super().__init__()
        self._gc = import_binding("gcipuinfo", self.name, "ships with the Graphcore Poplar SDK")
        try:
            self._info = self._gc.gcipuinfo()
            # Without update mode the library returns the values of its first query.
            self._info.setUpdateMode(True)
            count = len(self._info.getDevices())
        except Exception as err:
            raise MethodUnavailable(f"gc: gcipuinfo did not start ({one_line(err)})") from err
        if count == 0:
            raise MethodUnavailable("gc: gcipuinfo lists no IPU")
        self.channels = [Channel(f"ipu{i}") for i in range(count)]

    def read(self) -> list[float]:
        try:
            texts = list(self._info.getNamedAttributeForAll(self._gc.IpuPower))
            failure = None
        except Exception as err:  # noqa: BLE001
            texts, failure = [], err

        def one(i: int) -> float:
            if failure is not None:
                raise failure
            return watts(texts[i])

        return [self._value(i, lambda: one(i)) for i in range(len(self.channels))]


# gcipuinfo's attributes that tell an IPU from another of its kind, by the key identity() gives them
IDENTITY_ATTRIBUTES = {"serial": "SerialNumber", "pci_bus_id": "PciId", "firmware": "FirmwareVersion",
                       "driver": "DriverVersion"}


def identity() -> list[dict]:
    """Every IPU of this node by gcipuinfo's serial number, PCI id,
    firmware and driver version (an attribute this gcipuinfo lacks: None);
    [] where gcipuinfo does not start here."""
    try:
        gc = importlib.import_module("gcipuinfo")
        info = gc.gcipuinfo()
        count = len(info.getDevices())
    except Exception:  # noqa: BLE001 - no Poplar SDK here: no IPU to name
        return []
    values: dict[str, list[str | None]] = {}
    for key, attribute in IDENTITY_ATTRIBUTES.items():
        try:
            values[key] = [str(v) for v in info.getNamedAttributeForAll(getattr(gc, attribute))]
        except Exception:  # noqa: BLE001 - an attribute this version does not have
            values[key] = [None] * count
    return [{"library": "gcipuinfo", "index": i, "name": "Graphcore IPU", "uuid": None,
             **{key: (found[i] if i < len(found) else None) for key, found in values.items()}}
            for i in range(count)]


power = IpuPower  # the upstream name
