"""Devices held per namespace, counted as the capacity report counts them: whole cards,
MIG instances, shares (renamed or not), HAMi vGPUs by their memory; the namespaces add up
to the report's per-model figures."""

from decimal import Decimal

from k8s_sync.allocation import allocated_devices, by_kind, device_key, devices_by_namespace
from k8s_sync.selectors import CapacityReport, MigCapacity, NodeCapacity, _model_totals


def _node(name: str, model: str = "NVIDIA-H800", **kw) -> NodeCapacity:
    base = {"name": name, "gpu_model": model, "rack": "", "switch": "", "zone": "",
            "schedulable": True, "ready": True, "unschedulable": False, "cards": 8,
            "card_memory_mib": 81920, "whole_allocatable": 8, "whole_allocated": 0,
            "mig": (), "shared_allocatable": 0, "shared_allocated": 0,
            "sharing_strategy": "", "share_memory_mib": None}
    return NodeCapacity(**{**base, **kw})


def test_each_request_is_the_device_the_report_counts():
    whole = _node("h800-0")
    shares = _node("l40s-0", "NVIDIA-L40S", whole_allocatable=0, shared_allocatable=16,
                   sharing_strategy="time-slicing")
    single = _node("mig-0", "NVIDIA-A100", whole_allocatable=0,
                   mig=(MigCapacity("1g.10gb", 56, 0, 10240),))
    hami = _node("hami-0", "NVIDIA-A10", vgpus_per_card=10, card_memory_mib=24576)
    assert device_key(whole, "nvidia.com/gpu") == "gpu:NVIDIA-H800"
    assert device_key(shares, "nvidia.com/gpu") == "shared:NVIDIA-L40S"   # not renamed
    assert device_key(shares, "nvidia.com/gpu.shared") == "shared:NVIDIA-L40S"
    assert device_key(single, "nvidia.com/gpu") == "mig:1g.10gb"           # MIG single
    assert device_key(whole, "nvidia.com/mig-3g.40gb") == "mig:3g.40gb"
    assert device_key(whole, "cpu") is None
    assert device_key(_node("cpu-0", ""), "nvidia.com/gpu") is None
    held = devices_by_namespace([whole, shares, hami], [
        ("h800-0", "a", {"nvidia.com/gpu": "2", "cpu": "4"}),
        ("h800-0", "b", {"nvidia.com/gpu": "1"}),
        ("l40s-0", "a", {"nvidia.com/gpu": "3"}),
        ("hami-0", "b", {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "6144"}),
        ("gone-0", "a", {"nvidia.com/gpu": "8"}),           # a node not listed
        ("h800-0", "c", {"nvidia.com/gpu": "lots"})])       # not a quantity
    assert held == {"a": {"gpu:NVIDIA-H800": 2, "shared:NVIDIA-L40S": 3},
                    "b": {"gpu:NVIDIA-H800": 1, "gpu:NVIDIA-A10": Decimal("0.5")}}
    assert by_kind(held["a"]) == {"gpu": 2, "mig": 0, "shared": 3}


def test_namespaces_add_up_to_the_per_model_figures():
    nodes = (_node("h800-0", whole_allocated=3),
             _node("l40s-0", "NVIDIA-L40S", whole_allocatable=0, shared_allocatable=16,
                   shared_allocated=3, sharing_strategy="time-slicing"))
    report = CapacityReport(models=tuple(_model_totals(n.gpu_model, [n]) for n in nodes),
                            nodes=nodes, observed_at=None, bound=(
        ("h800-0", "a", {"nvidia.com/gpu": "2"}), ("h800-0", "x", {"nvidia.com/gpu": "1"}),
        ("l40s-0", "a", {"nvidia.com/gpu.shared": "3"})))
    total: dict[str, Decimal] = {}
    for held in report.allocated_by_namespace.values():
        for key, amount in held.items():
            total[key] = total.get(key, Decimal(0)) + amount
    assert total == allocated_devices(report) == {"gpu:NVIDIA-H800": 3,
                                                  "shared:NVIDIA-L40S": 3}
