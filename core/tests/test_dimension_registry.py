"""The dimension registry (``core.resources``) is the one place dimensions are declared
(issue 32, item 1): a module that names a dimension key by hand must be on the allow-list
below, with its reason, and a new one fails this test. The list may only shrink: an entry
whose module no longer names a key fails too.

"Names a dimension key by hand": a string literal (or the literal part of an f-string)
that is a plain dimension key other than ``cpu``/``memory`` (``gpu-memory``,
``gpu-shared``, ``pvcs``, ``rdma``), starts a qualified key (``gpu:``, ``mig:``,
``storage:``, ``iops:``, the engine's ``shared:``), or is one of the dimensions' extended
resources or ResourceQuota keys (``nvidia.com/gpu``, ``nvidia.com/mig-``,
``rdma/hca_shared_devices_a``, ``requests.nvidia.com/...``). ``cpu`` and ``memory`` are
Kubernetes' own resource names, written wherever a pod or a node is read, so they are not
scanned. Prose (docstrings, messages: strings with spaces) is not scanned. ``kubesim``
is the simulated cluster, which names Kubernetes resources as a cluster does: not scanned.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from core.resources import REGISTRY, by_kind, extended
from tenants.catalog import Resource, ResourceKind

ROOT = Path(__file__).resolve().parents[2]
APPS = ("core", "k8s_sync", "tenants", "jobs", "billing", "portal")

_PLAIN = {"gpu-memory", "gpu-shared", "pvcs", "rdma"}
_PREFIX = re.compile(r"^(gpu|mig|storage|iops|shared):")
_RESOURCE = re.compile(r"^(requests\.)?(nvidia\.com/(gpu|gpu\.shared|mig-.*)|rdma/.+)$")

#: module -> why it still names dimension keys by hand. Shrink it; never grow it without
#: a reason a reviewer accepts.
ALLOWED: dict[str, str] = {
    "core.resources": "the registry itself: every key, node resource and quota key, once",
    "tenants.catalog": "ResourceKind names each kind for the code that refers to one "
                       "(labels from the registry; test_the_catalog_kinds_are_the_registrys "
                       "holds the two equal)",
    "tenants.demand": "derives a job's GPU demand from its GPU fields (gpu:, mig:, "
                      "gpu-shared) and the derived gpu-memory: GPU rules, not a list",
    "tenants.quota": "overcommit binds every GPU model and MIG profile even with no capacity",
    "tenants.selectors": "a pool's storage:/iops:/pvcs grants and the ResourceQuota backstop's "
                         "gpu-memory/MIG rules",
    "tenants.series": "the usage series' GPU rows (cards, MIG, shares, GPU memory)",
    "tenants.storage": "iops: keys of a StorageClass's IOPS grants",
    "tenants.texts": "stored texts' codes for the plain GPU dimensions",
    "tenants.usage": "a pod's nvidia.com/ requests to GPU keys and the GPU memory they hold "
                     "(the device plugin's rules), volumes to storage:/iops:/pvcs",
    "tenants.utilisation": "GPU-hours per GPU key",
    "k8s_sync.allocation": "a pod's nvidia.com/ requests to the devices it holds per node",
    "k8s_sync.kueue": "the shared-GPU flavor's name from its registry entry",
    "k8s_sync.observe_kinds": "the pvcs count of observed claims",
    "k8s_sync.physical": "exclusive devices (whole cards) and shares for the watermark",
    "k8s_sync.selectors": "splits a node's nvidia.com/ allocatable into whole, MIG and shared "
                          "cards (the device plugin's and HAMi's rules)",
    "k8s_sync.specs.quantities": "the GPU device-plugin resources pods and ResourceQuotas "
                                 "are written with",
    "jobs.admission.capacity": "the engine's placement slots per GPU model, MIG profile, "
                               "shared model (gpu:, mig:, shared:)",
    "jobs.admission.incremental": "placement keys of the incremental pass",
    "jobs.admission.order": "the shared: placement key",
    "jobs.admission.state": "placement keys and the fair share's GPU units",
    "jobs.admission.types": "JobView.resource_key, the placement key",
    "jobs.kueue_submit": "names the gpu-memory field in a Kueue-mode refusal",
    "jobs.models": "a job's GPU key",
    "jobs.selectors.admission": "placement keys of admitted jobs, gpu-shared grants",
    "jobs.selectors.inventory": "the form's GPU and MIG inventory",
    "jobs.selectors.listing": "the job list's GPU filter",
    "jobs.selectors.preview": "the preview's shared-GPU key",
    "jobs.services": "the ceiling check's order of a job's dimensions and its gpu-memory field",
    "jobs.validation": "a submission's GPU key",
    "jobs.volume_iops": "iops: keys of a checkpoint volume",
    "jobs.window_kueue": "a maintenance window's GPU key",
    "billing.selectors_rates": "MIG devices of observed nodes for the rate card",
    "billing.selectors_usage": "usage by GPU key",
    "portal.cluster_figures": "the cluster page's GPU figures",
    "portal.dashboards": "the dashboards' GPU gauges",
    "portal.management.commands.demo_load": "demo data",
    "portal.management.commands.seed_demo": "demo grants",
    "portal.management.commands.seed_history": "demo history",
}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def hand_named(source: str) -> list[str]:
    """The dimension keys ``source`` names by hand (see the module's docstring)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if " " in text or "\n" in text:
                continue
            if text in _PLAIN or _PREFIX.match(text) or _RESOURCE.match(text):
                found.append(text)
    return found


def scan() -> dict[str, int]:
    """Module -> how many dimension keys it names by hand."""
    out: dict[str, int] = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if "tests" in parts or "migrations" in parts:
                continue
            count = len(hand_named(path.read_text()))
            if count:
                out[_module(path)] = count
    return out


def test_no_new_module_names_a_dimension_key_by_hand():
    found = scan()
    new = sorted(set(found) - set(ALLOWED))
    assert not new, (
        f"{new} name dimension keys by hand; read them from core.resources (the registry) "
        f"or add the module to ALLOWED with the reason")


def test_the_allow_list_only_shrinks():
    found = scan()
    stale = sorted(m for m in ALLOWED if m not in found)
    assert not stale, f"{stale} no longer name a dimension key: take them off ALLOWED"


def test_the_scan_sees_what_it_should():
    assert Counter(hand_named('x = f"gpu:{m}"; y = "rdma"; z = "requests.nvidia.com/gpu"'
                              '; w = "a gpu: word"; c = "cpu"')) == Counter(
        ["gpu:", "rdma", "requests.nvidia.com/gpu"])


def test_the_catalog_kinds_are_the_registrys():
    assert [k.value for k in ResourceKind] == [d.kind for d in REGISTRY]
    for kind in ResourceKind:
        assert str(kind.label) == str(by_kind(kind).name)


def test_rdma_is_one_entry_with_everything_a_dimension_needs():
    rdma = by_kind("rdma")
    assert rdma in extended()
    assert rdma.node_resource == "rdma/hca_shared_devices_a"
    assert rdma.quota_keys == ("requests.rdma/hca_shared_devices_a",)
    assert rdma.kueue_resource == rdma.node_resource and rdma.kueue_flavor
    assert rdma.job_field == "rdma_per_worker" and rdma.borrows and rdma.integral
    assert Resource.parse("rdma").label() == "RDMA NICs"
