"""HAMi v2.10.0's annotation formats at their edges, with literal expected values.

Register: JSON DeviceInfo list (pkg/device/devices.go) or the pre-2.8 CSV `id,count,devmem,devcore,type,numa,
health[,index[,mode]]:` per device; allocations: `UUID,NVIDIA,<mem>,<cores>:` per device, `;` per container
(devices.go EncodePodSingleDevice / DecodePodDevices)."""

from __future__ import annotations

import pytest

from gpu_tenancy.hami import protocol as hami


def test_sim_card_ids_are_pinned() -> None:
    # A change here re-registers every simulated card under a new UUID (and orphans the pods' allocations).
    assert hami.device_id("tenant-a", 0) == "GPU-8410f28c-b427-57c7-8e3c-84238d86026d"
    assert hami.device_id("tenant-a", 1) != hami.device_id("tenant-a", 0) != hami.device_id("tenant-b", 0)


@pytest.mark.parametrize("group", [
    {"model": "", "memoryMiB": 1, "count": 1},
    {"model": "NVIDIA L4", "memoryMiB": -1, "count": 1},
    {"model": "NVIDIA L4", "memoryMiB": 23034, "count": -1},
])
def test_an_invalid_gpu_group_is_refused_naming_it(group: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"^invalid GPU group \{"):
        hami.device_inventory("t", [group])


def test_a_group_of_no_cards_registers_nothing_and_split_count_is_at_least_one() -> None:
    assert hami.device_inventory("t", [{"model": "NVIDIA L4", "memoryMiB": 23034, "count": 0}]) == []
    assert [d["count"] for d in hami.device_inventory("t", [{"model": "NVIDIA L4", "memoryMiB": 1, "count": 2}], 1)] == [1, 1]
    with pytest.raises(ValueError, match=r"^split_count must be at least 1$"):
        hami.device_inventory("t", [{"model": "NVIDIA L4", "memoryMiB": 1, "count": 1}], 0)


def test_indexes_run_on_across_groups() -> None:
    devices = hami.device_inventory("t", [{"model": "NVIDIA L4", "memoryMiB": 23034, "count": 2},
                                          {"model": "NVIDIA A100-SXM4-80GB", "memoryMiB": 81920, "count": 1}])
    assert [(d["index"], d["type"], d["devmem"]) for d in devices] == [
        (0, "NVIDIA L4", 23034), (1, "NVIDIA L4", 23034), (2, "NVIDIA A100-SXM4-80GB", 81920)]
    assert hami.total_slots(devices) == 30


def test_the_annotation_leaves_out_fields_a_device_lacks_and_keeps_deviceinfos_order() -> None:
    assert hami.register_annotation([{"health": True, "id": "GPU-x", "extra": 1, "devmem": 5}]) == (
        '[{"id":"GPU-x","devmem":5,"health":true}]')


def test_legacy_register_edges() -> None:
    # Padded, an empty index and mode, health spelt in capitals.
    assert hami.parse_register_annotation("  GPU-a,10,100,100,NVIDIA,0, TRUE ,,:  ") == [
        {"id": "GPU-a", "count": 10, "devmem": 100, "devcore": 100, "type": "NVIDIA", "numa": 0, "health": True}]
    with pytest.raises(ValueError, match=r"^legacy register entry has 6 fields, expected at least 7: 'GPU-a,10,100,100,NVIDIA,0'$"):
        hami.parse_register_annotation("GPU-a,10,100,100,NVIDIA,0:")


@pytest.mark.parametrize("value", ['[1, 2]', '[{"id": "a"}, "b"]'])
def test_a_json_register_that_is_not_a_list_of_objects_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match=r"^register annotation JSON must be a list of objects$"):
        hami.parse_register_annotation(value)


def test_a_json_register_keeps_health_as_given() -> None:
    assert hami.parse_register_annotation(' [{"id":"a","health":true},{"id":"b","health":false}] ') == [
        {"id": "a", "health": True}, {"id": "b", "health": False}]


def test_allocations_without_the_trailing_container_separator_keep_the_last_container() -> None:
    assert hami.parse_devices_allocated("GPU-a,NVIDIA,1,2:;GPU-b,NVIDIA,3,4:") == [
        [{"uuid": "GPU-a", "type": "NVIDIA", "usedmem": 1, "usedcores": 2}],
        [{"uuid": "GPU-b", "type": "NVIDIA", "usedmem": 3, "usedcores": 4}],
    ]
    assert hami.parse_devices_allocated(";") == [[]]


def test_an_allocation_entry_of_three_fields_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"^allocated device entry needs 4 fields: 'GPU-a,NVIDIA,1'$"):
        hami.parse_devices_allocated("GPU-a,NVIDIA,1:;")


def test_lock_parts_of_the_wrong_count_name_no_owner_but_keep_the_value() -> None:
    assert hami.parse_lock("a,b") == ("a,b", None, None)
    assert hami.parse_lock("a,b,c,d") == ("a,b,c,d", None, None)
    assert hami.lock_owner("t,ns,") is None


def test_legacy_register_entries_of_eight_and_nine_fields_keep_what_they_carry() -> None:
    # Eight fields: an index, no mode. Nine with an empty index: the mode alone.
    assert hami.parse_register_annotation("GPU-a,10,100,100,NVIDIA,0,true,3:GPU-b,10,100,100,NVIDIA,1,true,,hami-core:") == [
        {"id": "GPU-a", "count": 10, "devmem": 100, "devcore": 100, "type": "NVIDIA", "numa": 0, "health": True,
         "index": 3},
        {"id": "GPU-b", "count": 10, "devmem": 100, "devcore": 100, "type": "NVIDIA", "numa": 1, "health": True,
         "mode": "hami-core"},
    ]


def test_an_empty_entry_between_devices_is_skipped_not_the_end() -> None:
    assert [d["id"] for d in hami.parse_register_annotation("GPU-a,1,1,1,NVIDIA,0,true::GPU-b,1,1,1,NVIDIA,0,true:")] == [
        "GPU-a", "GPU-b"]
    assert hami.parse_devices_allocated("GPU-a,NVIDIA,1,2::GPU-b,NVIDIA,3,4:;") == [[
        {"uuid": "GPU-a", "type": "NVIDIA", "usedmem": 1, "usedcores": 2},
        {"uuid": "GPU-b", "type": "NVIDIA", "usedmem": 3, "usedcores": 4},
    ]]


def test_only_the_last_empty_container_chunk_is_dropped() -> None:
    # Two containers: `a:;b:;` splits into a, b and a trailing empty chunk, which alone is no container.
    assert hami.parse_devices_allocated("GPU-a,NVIDIA,1,2:;GPU-b,NVIDIA,3,4:;") == [
        [{"uuid": "GPU-a", "type": "NVIDIA", "usedmem": 1, "usedcores": 2}],
        [{"uuid": "GPU-b", "type": "NVIDIA", "usedmem": 3, "usedcores": 4}],
    ]
