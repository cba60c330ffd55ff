"""The datasheet peaks by device name: the variants that share a family
name get their own peak, a name that does not say which device it is gets
none (then the driver measures); the systems of platform.xml name their
device, whose number the table alone holds."""

import pytest

from caraml import device_peaks
from caraml.login import systems


@pytest.mark.parametrize("name, tflops", [
    ("NVIDIA H100 80GB HBM3", 989.4),
    ("NVIDIA H100 PCIe", 756.5),
    ("NVIDIA H100 NVL", 835.5),
    ("NVIDIA H200", 989.4),
    ("NVIDIA GH200 480GB", 989.4),
    # a GB200's B200 runs at up to 1,200 W, an HGX B200 at 1,000 W: their peaks differ
    ("NVIDIA GB200", 2500.0),
    ("NVIDIA B200", 2250.0),
    ("NVIDIA A100-SXM4-40GB", 312.0),
    ("NVIDIA L40S", 362.05),
    ("AMD Instinct MI300X", 1307.4),
    ("AMD Instinct MI300A", 980.6),
    # the MI250X is no MI250: 383 TFLOP/s a module of two GCDs, not 362.1
    ("AMD Instinct MI250X", 191.5),
    ("AMD Instinct MI250", 181.05),
])
def test_each_known_device_has_its_own_peak(name, tflops):
    peak = device_peaks.lookup(name)
    assert peak.tflops == tflops and peak.source


@pytest.mark.parametrize("name", ["AMD Instinct MI250X / MI250", "NVIDIA GeForce GT 710", "cpu"])
def test_an_ambiguous_or_unknown_name_has_no_peak(name):
    assert device_peaks.lookup(name) is None


def test_every_system_names_a_device_of_the_table_or_how_to_find_its_peak():
    # platform.xml names the device; its number is only in the table
    for tag, system in systems.load().items():
        peak = system["peak_tflops"]
        assert peak in device_peaks.PEAKS or peak in ("auto", "measure", ""), (tag, peak)


def test_a_system_that_names_its_device_gets_the_tables_peak_in_the_driver():
    from types import SimpleNamespace

    from llm_training.pretrain_gpt import peak_of

    peak = peak_of(SimpleNamespace(peak_tflops="MI250-GCD"), dist=None)
    assert (peak.tflops, peak.basis, peak.key) == (181.05, "datasheet", "MI250-GCD")
    assert "MI250 data sheet" in peak.source
