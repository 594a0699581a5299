"""Kueue's Configuration as Trainyard recommends it, from its pod-start policy: pure.

Kueue reads its Configuration (``config.kueue.x-k8s.io/v1beta2``) from the ConfigMap
``kueue-manager-config`` in ``kueue-system``, key ``controller_manager_config.yaml``
(Kueue's ``config/components/manager/controller_manager_config.yaml``). Trainyard does not
own Kueue's installation: the platform team applies ``deploy/kueue/`` (rendered by
:func:`configuration` from the default policy; ``k8s_sync/tests/test_kueue_config.py``
keeps the file equal to it). kubesim is given the same ConfigMap in Kueue mode
(``make run`` with ``TRAINYARD_ADMISSION_BACKEND=kueue``, and the Kueue-mode tests).

* **Pod-start deadline** (``Policy.pod_start_deadline_seconds``,
  ``Policy.pod_start_attempts``): ``waitForPodsReady.timeout`` is the deadline, and a
  Workload timed out ``attempts`` times is deactivated: ``backoffLimitCount`` =
  ``attempts - 1`` (Kueue deactivates when ``requeueState.count + 1 > limit``, on the
  ``attempts``-th timeout, as the engine fails the job on its ``attempts``-th
  admission). ``recoveryTimeout`` equals the deadline (a running job that loses a pod
  gets as long to get it back). ``timestamp: Eviction`` and the 60 s backoff base are
  Kueue's defaults.
* **Integrations**: ``kubeflow.org/pytorchjob`` and ``trainer.kubeflow.org/trainjob``,
  the kinds Trainyard creates.
* **HAMi** (``nvidia.com/gpumem``, ``nvidia.com/gpucores`` per card, enforced on the node by
  HAMi's scheduler and its in-container limiter): Kueue would refuse a pod requesting a
  resource no ClusterQueue covers, so both are transformed away (``Replace``, no outputs):
  the job's cards count as ``nvidia.com/gpu`` in its flavor. The pool's GPU-memory quota
  (``gpu-memory``, which counts whole cards' memory per model, something no
  transformation can say: Kueue's outputs do not depend on the flavor) is Trainyard's
  submission check in Kueue mode (``jobs.services``).
"""

from __future__ import annotations

from typing import Any

import yaml

from k8s_sync.specs import HAMI_CORES_RESOURCE, HAMI_MEMORY_RESOURCE

__all__ = ["CONFIG_KEY", "CONFIG_NAME", "CONFIG_NAMESPACE", "config_map", "configuration",
           "configuration_yaml"]

CONFIG_NAMESPACE = "kueue-system"
CONFIG_NAME = "kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"
FRAMEWORKS = ("kubeflow.org/pytorchjob", "trainer.kubeflow.org/trainjob")


def _duration(seconds: int) -> str:
    minutes, sec = divmod(int(seconds), 60)
    return f"{minutes}m{sec}s" if sec and minutes else (f"{minutes}m" if minutes else f"{sec}s")


def configuration(*, pod_start_deadline_seconds: int, pod_start_attempts: int
                  ) -> dict[str, Any]:
    """The Configuration Trainyard recommends for a policy's pod-start deadline."""
    deadline = max(1, int(pod_start_deadline_seconds))
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "waitForPodsReady": {
            "timeout": _duration(deadline),
            "recoveryTimeout": _duration(deadline),
            "blockAdmission": False,
            "requeuingStrategy": {
                "timestamp": "Eviction",
                "backoffLimitCount": max(0, int(pod_start_attempts) - 1),
                "backoffBaseSeconds": 60,
                "backoffMaxSeconds": 3600,
            },
        },
        "integrations": {"frameworks": list(FRAMEWORKS)},
        "resources": {"transformations": [
            {"input": HAMI_MEMORY_RESOURCE, "strategy": "Replace", "outputs": {}},
            {"input": HAMI_CORES_RESOURCE, "strategy": "Replace", "outputs": {}},
        ]},
    }


def configuration_yaml(**policy: int) -> str:
    return yaml.safe_dump(configuration(**policy), sort_keys=False)


def config_map(**policy: int) -> dict[str, Any]:
    """The ConfigMap Kueue reads its Configuration from."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIG_NAME, "namespace": CONFIG_NAMESPACE,
                         "labels": {"app.kubernetes.io/name": "kueue",
                                    "app.kubernetes.io/part-of": "trainyard"}},
            "data": {CONFIG_KEY: configuration_yaml(**policy)}}
