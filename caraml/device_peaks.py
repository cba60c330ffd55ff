"""Datasheet peaks of the accelerators the suite knows, the denominator of
MFU: by a one-word key that a system of platform.xml names, and by the name
the driver reports (nvidia-smi, torch.cuda.get_device_name, amd-smi) for
the LOCAL system. Dense (no
sparsity) 16-bit tensor TFLOP/s per device as the driver sees it: an MI250
shows each of its two GCDs as a device, so its entry is per GCD.

Standard library only: the login node's python3 reads it before any
environment exists (caraml/login/local_host.py), and the drivers read it on the
node."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

# The bases of a peak: a datasheet's figure (or one the system states), the
# device's dense matmul rate measured around the training, or none
DATASHEET, MEASURED, NO_PEAK = "datasheet", "measured-matmul", "none"


@dataclass(frozen=True)
class Peak:
    """A peak TFLOP/s per device, MFU's denominator, from the table or the
    driver to the row: its value, its basis, where it comes from in words,
    and its key in PEAKS where it is a datasheet entry's."""

    model: str
    tflops: float  # nan: unknown
    source: str
    basis: str = DATASHEET
    key: str | None = None
    # a measured peak: the TFLOP/s of every window timed, of which tflops is
    # the best (the LLM driver's matmul_rate.py)
    windows: tuple[float, ...] = ()


def measured(tflops: float, windows: tuple[float, ...] = ()) -> Peak:
    return Peak("", tflops, "the device's dense matmul rate, measured: the best of short windows "
                "before and after training", MEASURED, windows=windows)


def given(tflops: float) -> Peak:
    return Peak("", tflops, f"--peak-tflops {tflops:g} given to the driver")


NONE = Peak("", math.nan, "no peak given", NO_PEAK)


def of_line(tflops: float, basis: str | None, key: str | None) -> Peak:
    """The peak a driver's summary line names (peak_tflops, peak_basis, peak_key)."""
    if basis == MEASURED:
        return measured(tflops)
    return PEAKS[key] if key in PEAKS else given(tflops)


# The datasheet peak of each device, by a one-word key that a system of
# platform.xml names (its `peak_tflops`): the one place these numbers are.
_DATASHEETS: dict[str, Peak] = {
    "A100": Peak("NVIDIA A100", 312.0,
                 "NVIDIA A100 Tensor Core GPU datasheet: FP16/BF16 tensor 312 TFLOP/s dense"),
    "B200": Peak("NVIDIA B200 (HGX)", 2250.0,
                 "NVIDIA DGX B200 datasheet: FP8 training 72 PFLOP/s with sparsity for eight "
                 "B200 GPUs at 1,000 W, so FP16/BF16 tensor 4.5 PFLOP/s sparse, 2,250 TFLOP/s "
                 "dense per GPU"),
    "GB200": Peak("NVIDIA B200 GPU in GB200 (Grace Blackwell)", 2500.0,
                  "NVIDIA GB200 NVL72 datasheet: FP16/BF16 tensor 10 PFLOP/s with sparsity per "
                  "GB200 superchip of two B200 GPUs at up to 1,200 W each, 2,500 TFLOP/s dense "
                  "per GPU"),
    "GH200": Peak("NVIDIA GH200 (H100 GPU)", 989.4,
                  "NVIDIA GH200 Grace Hopper Superchip datasheet: FP16/BF16 tensor 989 TFLOP/s "
                  "dense (CARAML paper, Table I: 990)"),
    "H100-NVL": Peak("NVIDIA H100 NVL", 835.5,
                     "NVIDIA H100 datasheet: H100 NVL FP16/BF16 tensor 1,671 TFLOP/s with "
                     "sparsity, half of it dense"),
    "H100-PCIe": Peak("NVIDIA H100 PCIe", 756.5,
                      "NVIDIA H100 datasheet: H100 PCIe FP16/BF16 tensor 1,513 TFLOP/s with "
                      "sparsity, half of it dense (CARAML paper, Table I: 756)"),
    "H100-SXM": Peak("NVIDIA H100 SXM", 989.4,
                     "NVIDIA H100 datasheet: H100 SXM FP16/BF16 tensor 1,979 TFLOP/s with "
                     "sparsity, half of it dense (CARAML paper, Table I: 990)"),
    "H200-NVL": Peak("NVIDIA H200 NVL", 835.5,
                     "NVIDIA H200 datasheet: H200 NVL FP16/BF16 tensor 1,671 TFLOP/s with "
                     "sparsity, half of it dense"),
    "H200-SXM": Peak("NVIDIA H200 SXM", 989.4,
                     "NVIDIA H200 datasheet: H200 SXM FP16/BF16 tensor 1,979 TFLOP/s with "
                     "sparsity, half of it dense"),
    "L40S": Peak("NVIDIA L40S", 362.05,
                 "NVIDIA L40S datasheet: FP16/BF16 tensor 362.05 TFLOP/s dense"),
    "MI300X": Peak("AMD Instinct MI300X", 1307.4,
                   "AMD Instinct MI300X data sheet: FP16/BF16 1,307.4 TFLOP/s dense"),
    "MI300A": Peak("AMD Instinct MI300A", 980.6,
                   "AMD Instinct MI300A data sheet: FP16/BF16 980.6 TFLOP/s dense"),
    "MI250X-GCD": Peak("AMD Instinct MI250X (one GCD)", 191.5,
                       "AMD Instinct MI250X data sheet: FP16/BF16 383 TFLOP/s per module of "
                       "two GCDs"),
    "MI250-GCD": Peak("AMD Instinct MI250 (one GCD)", 181.05,
                      "AMD Instinct MI250 data sheet: FP16/BF16 362.1 TFLOP/s per module of "
                      "two GCDs (CARAML paper, Table I)"),
    "GC200": Peak("Graphcore GC200 IPU", 250.0,
                  "Graphcore IPU-M2000 data sheet: 1 PetaFLOP/s FP16.16 for four GC200 IPUs, "
                  "250 TFLOP/s each (CARAML paper, Table I)"),
}
PEAKS: dict[str, Peak] = {key: dataclasses.replace(peak, key=key) for key, peak in _DATASHEETS.items()}

# The key of a device by the name its driver reports; most specific pattern
# first: "H100 NVL" and "H100 PCIe" before plain H100, "MI250X" before
# "MI250". None: the name does not say which device it is. ROCm names an
# MI250X and an MI250 alike ("AMD Instinct MI250X / MI250"), and their peaks
# differ by 6 %.
_NAMES: list[tuple[str, str | None]] = [
    (r"MI250X\s*/\s*MI250", None),
    (r"A100", "A100"),
    (r"GH200", "GH200"),
    # a GB200's GPUs report "NVIDIA GB200", an HGX board's "NVIDIA B200"
    (r"GB200", "GB200"),
    (r"B200", "B200"),
    (r"H100.*NVL", "H100-NVL"),
    (r"H100.*PCIe", "H100-PCIe"),
    (r"H100", "H100-SXM"),
    (r"H200.*NVL", "H200-NVL"),
    (r"H200", "H200-SXM"),
    (r"L40S", "L40S"),
    (r"MI300X", "MI300X"),
    (r"MI300A", "MI300A"),
    (r"MI250X", "MI250X-GCD"),
    (r"MI250", "MI250-GCD"),
]


def lookup(device_name: str) -> Peak | None:
    """The datasheet peak of a device by the name its driver reports; None
    for a device the table does not know (then the peak is measured)."""
    for pattern, key in _NAMES:
        if re.search(pattern, device_name, re.IGNORECASE):
            return None if key is None else PEAKS[key]
    return None
