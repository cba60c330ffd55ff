"""jpwr.identity: what tells a node's accelerators from others of their
kind, through the methods' bindings (fakes at the device boundary)."""

from jpwr_fakes import FakeAmdSmi, FakeGcIpuInfo, FakeNvml

from jpwr import identity


def test_a_node_without_vendor_libraries_names_no_accelerator(no_vendor_libraries):
    assert identity.devices() == []


def test_nvidia_gpus_by_uuid_serial_bus_id_firmware_and_driver(install):
    sensors = {"power_mw": 1, "energy_mj": 1}
    install("pynvml", FakeNvml([{"uuid": "GPU-aaaa", "serial": "1652022012345", **sensors},
                                {"uuid": "GPU-bbbb", "bus": "00000000:C1:00.0", **sensors}]))
    first, second = identity.devices()
    assert first == {"library": "nvml", "index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-aaaa",
                     "serial": "1652022012345", "pci_bus_id": "00000000:01:00.0",
                     "firmware": "96.00.89.00.01", "driver": "580.65.06"}
    # a GPU without a serial (NVML: Not Supported) is still named by its UUID and bus
    assert (second["uuid"], second["serial"], second["pci_bus_id"]) == ("GPU-bbbb", None, "00000000:C1:00.0")


def test_amd_gpus_by_uuid_board_serial_bdf_and_vbios(install):
    sensors = {"power_info": {}, "energy_count": {}}
    install("amdsmi", FakeAmdSmi([{"uuid": "a1-ff", "serial": "PCB0123", **sensors},
                                  {"uuid": "a2-ff", **sensors}]))
    first, second = identity.devices()
    assert first == {"library": "amdsmi", "index": 0, "name": "AMD Instinct MI250X / MI250", "uuid": "a1-ff",
                     "serial": "PCB0123", "pci_bus_id": "0000:c1:00.0", "firmware": "113-D65201-046",
                     "driver": "6.8.5"}
    # a board without its own serial ("N/A") falls back to the ASIC's
    assert second["serial"] == "0xABCDEF0123456789"


def test_ipus_by_serial_and_pci_id_an_attribute_gcipuinfo_lacks_unknown(install):
    install("gcipuinfo", FakeGcIpuInfo(["98.3W", "N/A"]))
    found = identity.devices()
    assert [d["serial"] for d in found] == ["0123.0045.0000", "0123.0045.0001"]
    assert [d["pci_bus_id"] for d in found] == ["0000:1a:00.0", "0000:1b:00.0"]
    assert {d["firmware"] for d in found} == {"2.6.0"} and {d["driver"] for d in found} == {None}
