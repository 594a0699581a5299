"""A TrainJob's pods at their tier's PriorityClass (pure): one ClusterTrainingRuntime per
runtime and tier, written by Trainyard.

Why a runtime per tier, not the TrainJob's runtime patch: Trainer's ``PodSpecPatch`` (the
pod part of ``spec.runtimePatches``, formerly ``podTemplateOverrides``) has no
``priorityClassName`` (kubeflow/trainer v2.3.0 and ``main``,
``pkg/apis/trainer/v1alpha1/trainjob_types.go``: ``serviceAccountName``, ``volumes``,
``initContainers``, ``containers``, ``imagePullSecrets``, ``securityContext``,
``nodeSelector``, ``affinity``, ``tolerations``, ``schedulingGates``,
``terminationGracePeriodSeconds``; the bundled CRD's schema has the same fields), so the
API server prunes it and the webhook has nothing to apply. The runtime's own pod template
is copied into the JobSet whole, ``priorityClassName`` included
(``pkg/runtime/framework/plugins/jobset/builder.go`` patches only containers, labels,
annotations and the patches' fields into it; Trainer's
``pkg/runtime/framework/core/framework_test.go`` ``TestRunComponentBuilderPlugins``
builds a JobSet whose pods keep the runtime's ``system-node-critical``). So Trainyard writes
``<runtime>-<tier>``: a copy of the runtime the job names with the tier's PriorityClass on
every replicated job's pod template, and the TrainJob references the copy.

The copy carries Trainyard's labels (``trainyard.io/managed-by``, the tier, and the
runtime it copies), so the runtime list offered to researchers can leave it out, and it
is refreshed from the original each time a TrainJob is created on it (server-side apply).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from core.choices import Tier
from k8s_sync import naming

__all__ = ["LABEL_RUNTIME_OF", "build_tier_runtime", "is_tier_runtime", "tier_runtime_name"]

#: The label naming the ClusterTrainingRuntime a tier copy was made from.
LABEL_RUNTIME_OF = "trainyard.io/runtime-of"


def tier_runtime_name(runtime: str, tier: Tier | str) -> str:
    """``<runtime>-<tier>``, the ClusterTrainingRuntime a TrainJob of ``tier`` runs on
    (a DNS-1123 subdomain of at most 253 characters: the runtime name is cut to fit)."""
    suffix = f"-{Tier(tier).value}"
    return f"{runtime[:253 - len(suffix)].rstrip('.-')}{suffix}"


def build_tier_runtime(base: Mapping[str, Any], tier: Tier | str) -> dict[str, Any]:
    """The tier's copy of the ClusterTrainingRuntime ``base`` (as read from the cluster):
    its spec, every replicated job's pod template at the tier's PriorityClass."""
    tier = Tier(tier)
    meta = base.get("metadata") or {}
    spec = copy.deepcopy(dict(base.get("spec") or {}))
    for rjob in ((spec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []:
        pod = (((rjob.setdefault("template", {}).setdefault("spec", {}))
                .setdefault("template", {})).setdefault("spec", {}))
        pod["priorityClassName"] = naming.priority_class_name(tier)
    of = str(meta.get("name") or "")[:63].rstrip(".-_")  # a label value
    labels = {**(meta.get("labels") or {}), **naming.managed_labels(),
              naming.LABEL_TIER: tier.value, LABEL_RUNTIME_OF: of}
    return {"apiVersion": base.get("apiVersion") or "trainer.kubeflow.org/v1alpha1",
            "kind": base.get("kind") or "ClusterTrainingRuntime",
            "metadata": {"name": tier_runtime_name(str(meta.get("name") or ""), tier),
                         "labels": labels,
                         **({"annotations": dict(meta["annotations"])}
                            if meta.get("annotations") else {})},
            "spec": spec}


def is_tier_runtime(obj: Mapping[str, Any]) -> bool:
    """Whether a ClusterTrainingRuntime is one of Trainyard's tier copies."""
    return LABEL_RUNTIME_OF in ((obj.get("metadata") or {}).get("labels") or {})
