import json

import pytest

from gpu_tenancy.hami import protocol as hami


def test_inventory_expands_groups_with_deterministic_ids() -> None:
    gpus = [{"model": "NVIDIA L4", "memoryMiB": 23034, "count": 2}]
    devices = hami.device_inventory("tenant-b", gpus)
    assert [d["index"] for d in devices] == [0, 1]
    assert devices == hami.device_inventory("tenant-b", gpus)
    assert devices[0]["id"] != devices[1]["id"]
    assert devices[0]["id"].startswith("GPU-")
    assert hami.device_inventory("tenant-a", gpus)[0]["id"] != devices[0]["id"]
    assert devices[0] | {"id": "x"} == {
        "id": "x",
        "index": 0,
        "count": 10,
        "devmem": 23034,
        "devcore": 100,
        "type": "NVIDIA L4",
        "numa": 0,
        "mode": "hami-core",
        "health": True,
    }
    assert hami.total_slots(devices) == 20


def test_a_card_nvml_names_without_nvidia_registers_with_the_prefix() -> None:
    # register.go: `if !strings.HasPrefix(Model, "NVIDIA") { Model = fmt.Sprintf("NVIDIA-%s", Model) }`.
    devices = hami.device_inventory("t", [{"model": "Tesla T4", "memoryMiB": 15360, "count": 1}])
    assert [d["type"] for d in devices] == ["NVIDIA-Tesla T4"]
    assert hami.device_type("NVIDIA L4") == "NVIDIA L4"
    assert hami.device_type("NVIDIAL4") == "NVIDIAL4"  # HasPrefix "NVIDIA", no space required


def test_inventory_rejects_an_empty_group() -> None:
    with pytest.raises(ValueError, match="invalid GPU group"):
        hami.device_inventory("t", [{"model": "NVIDIA L4", "memoryMiB": 0, "count": 1}])


def test_register_annotation_round_trips_compact_json() -> None:
    devices = hami.device_inventory("t", [{"model": "NVIDIA-A100-SXM4-80GB", "memoryMiB": 81920, "count": 1}])
    encoded = hami.register_annotation(devices)
    assert " " not in encoded
    assert json.loads(encoded) == devices
    assert hami.parse_register_annotation(encoded) == devices


def test_register_annotation_missing_health_is_unhealthy() -> None:
    parsed = hami.parse_register_annotation('[{"id":"GPU-MOCK-0","count":10,"devmem":1,"devcore":100,"type":"NVIDIA"}]')
    assert parsed[0]["health"] is False


def test_legacy_csv_register_annotation() -> None:
    parsed = hami.parse_register_annotation(
        "GPU-a,10,81920,100,NVIDIA-A100,0,true,0,hami-core:GPU-b,10,1,100,NVIDIA,1,false:"
    )
    assert parsed[0] == {
        "id": "GPU-a",
        "count": 10,
        "devmem": 81920,
        "devcore": 100,
        "type": "NVIDIA-A100",
        "numa": 0,
        "health": True,
        "index": 0,
        "mode": "hami-core",
    }
    assert parsed[1]["health"] is False and "index" not in parsed[1]
    assert hami.parse_register_annotation("") == []


def test_parse_lock_formats() -> None:
    assert hami.parse_lock("2026-12-02T20:00:00Z,default,pod-a") == ("2026-12-02T20:00:00Z", "default", "pod-a")
    assert hami.parse_lock("2026-12-02T20:00:00Z") == ("2026-12-02T20:00:00Z", None, None)
    assert hami.lock_owner("2026-12-02T20:00:00Z") is None
    assert hami.lock_owner(None) is None
    assert hami.lock_owner("t,ns,p") == ("ns", "p")
    # Upstream ParseNodeLock: exactly three parts, otherwise malformed (no owner).
    assert hami.lock_owner("t,ns,p,extra") is None
    assert hami.lock_owner("t,ns") is None
    assert hami.lock_owner("t,,p") is None
    assert hami.lock_owner("") is None


def test_register_annotation_is_the_json_hami_2_10_decodes() -> None:
    # pkg/device/devices.go DeviceInfo json tags at v2.10.0: id,index,count,devmem,devcore,type,numa,mode,health.
    devices = hami.device_inventory("t", [{"model": "NVIDIA L4", "memoryMiB": 23034, "count": 1}])
    decoded = json.loads(hami.register_annotation(devices))
    assert list(decoded[0]) == ["id", "index", "count", "devmem", "devcore", "type", "numa", "mode", "health"]
    assert decoded[0]["health"] is True and "NVIDIA" in decoded[0]["type"]


def test_parse_devices_allocated() -> None:
    value = "GPU-aaa,NVIDIA,3000,30:GPU-bbb,NVIDIA,1000,0:;;GPU-ccc,NVIDIA,24576,100:;"
    assert hami.parse_devices_allocated(value) == [
        [
            {"uuid": "GPU-aaa", "type": "NVIDIA", "usedmem": 3000, "usedcores": 30},
            {"uuid": "GPU-bbb", "type": "NVIDIA", "usedmem": 1000, "usedcores": 0},
        ],
        [],
        [{"uuid": "GPU-ccc", "type": "NVIDIA", "usedmem": 24576, "usedcores": 100}],
    ]
    assert hami.parse_devices_allocated("") == []
