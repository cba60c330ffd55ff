"""Numbers as the page writes them: 3 significant digits with thousands
separators, times in s, min or h and energies in Wh, kWh or MWh chosen per
value, never milli-hours."""

from __future__ import annotations

import math

import pytest

from caraml.compare.units import duration, energy, number


@pytest.mark.parametrize("value, text", [(47505, "47,500"), (19390.4, "19,400"), (0.3456, "0.346"),
                                         (999.6, "1,000"), (5.0, "5.00"), (1234567, "1,230,000"),
                                         (0.00123, "0.00123"), (0, "0"), (-2.345, "-2.35"),
                                         (math.nan, "n/a")])
def test_three_significant_digits_thousands_separated(value, text):
    assert number(value) == text


@pytest.mark.parametrize("seconds, text", [(12.0, "12.0 s"), (119.0, "119 s"), (312.2, "5.20 min"),
                                           (3351.9, "55.9 min"), (7200.0, "2.00 h"), (52200.0, "14.5 h"),
                                           (3.6e6, "1,000 h")])
def test_a_time_is_in_seconds_minutes_or_hours(seconds, text):
    assert duration(seconds) == text


@pytest.mark.parametrize("wh, text", [(0.4, "0.400 Wh"), (83.772, "83.8 Wh"), (999.0, "999 Wh"),
                                      (1500.0, "1.50 kWh"), (93_700.0, "93.7 kWh"), (2.3e6, "2.30 MWh")])
def test_an_energy_is_in_wh_kwh_or_mwh(wh, text):
    assert energy(wh) == text
