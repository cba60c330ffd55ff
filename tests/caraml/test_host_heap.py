"""caraml/node/host_heap.py: a CPU rank's tensors come from the heap and
what they free stays there, as glibc's own malloc_info reports it, in a
process that holds and frees eight 12 MiB tensors (by default glibc maps
each of them on its own and gives them back when they are freed)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from caraml.node import dist as caraml_dist

HOLD_AND_FREE = textwrap.dedent("""
    import ctypes, json, os, sys, tempfile
    import xml.etree.ElementTree as ET
    import torch
    from caraml.node import host_heap

    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]

    def malloc_info():
        path = os.path.join(tempfile.mkdtemp(), "malloc.xml")
        f = libc.fopen(path.encode(), b"w")
        libc.malloc_info(0, f)
        libc.fclose(f)
        root = ET.parse(path).getroot()  # the totals are the root's own children
        return {"mapped": int(root.find("./total[@type='mmap']").get("count")),
                "heap": int(root.find("./system[@type='current']").get("size"))}

    took = host_heap.keep_freed() if sys.argv[1] == "kept" else None
    before = malloc_info()
    held = [torch.empty(3 * 2**20).fill_(1.0) for _ in range(8)]
    holding = malloc_info()
    del held
    print(json.dumps({"took": took, "before": before, "holding": holding, "freed": malloc_info()}))
""")
MIB = 2**20


def _heap(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", HOLD_AND_FREE, mode], capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_kept_the_tensors_come_from_the_heap_and_stay_there_when_freed():
    kept = _heap("kept")
    assert kept["took"] is True
    assert kept["holding"]["mapped"] == kept["before"]["mapped"]  # none mapped on its own
    assert kept["holding"]["heap"] - kept["before"]["heap"] >= 8 * 12 * MIB
    assert kept["freed"]["heap"] >= kept["holding"]["heap"]  # nothing given back


def test_by_default_glibc_maps_each_such_tensor_on_its_own():
    returned = _heap("default")
    assert returned["holding"]["mapped"] - returned["before"]["mapped"] >= 8
    assert returned["freed"]["mapped"] == returned["before"]["mapped"]


def test_a_cpu_rank_has_its_heap_kept(monkeypatch):
    kept = []
    monkeypatch.setattr(caraml_dist.host_heap, "keep_freed", lambda: kept.append(True) or True)
    for name in ("MASTER_ADDR", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    dist = caraml_dist.init("cpu")
    try:
        assert dist.device.type == "cpu" and kept == [True]
    finally:
        dist.close()
