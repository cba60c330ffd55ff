"""Graphcore IPUs through gcipuinfo (ships with the Poplar SDK). The library
reports each IPU's power as text such as "98.3W", or "N/A" where an IPU has
no own sensor; that becomes NaN for the IPU concerned, never a shifted list.
No hardware energy counter is available."""

from __future__ import annotations

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


power = IpuPower  # the upstream name
