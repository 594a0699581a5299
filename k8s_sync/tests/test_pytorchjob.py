"""The PyTorchJob builder and the checkpoint PVC: golden manifests, CRD/webhook validation,
every JobSpec ValueError path, and one end-to-end run against kubesim over HTTP.

The golden literals are whole manifests; a pod template is written once per case and
used for Master and Worker because the two must be identical.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from decimal import Decimal

import kubernetes_validate
import pytest

from k8s_sync import manifests
from k8s_sync.client import get_client
from k8s_sync.crd_validation import (
    CrdValidationError,
    pytorchjob_errors,
    schema_errors,
    validate_pytorchjob,
)
from k8s_sync.naming import Tier
from k8s_sync.placement import dedicated_placement
from k8s_sync.reconcile import converge
from k8s_sync.specs import JobSpec, PoolSpec, validate_image

BASE = {"tenant_slug": "acme", "image": "registry.example.org:5000/ml/llm-ft:1.4",
        "command": ("torchrun", "train.py"), "max_run_seconds": 86_400}
DEV = {"pool": "dev", "tier": Tier.DEVELOPMENT, "grace_seconds": 300,
       "checkpoint_interval_seconds": 300}
PROD = {"pool": "prod", "tier": Tier.PRODUCTION, "grace_seconds": 30,
        "checkpoint_interval_seconds": 1800}
BATCH = {"pool": "dev", "tier": Tier.BATCH, "grace_seconds": 30,
         "checkpoint_interval_seconds": 300}


def job(**overrides) -> JobSpec:
    return JobSpec(**{**BASE, **overrides})


SPECS = {
    "single_gpu": lambda: job(
        **DEV, job_id=101, name_hint="Fine-tune BERT", gpus_per_replica=1,
        gpu_product="NVIDIA-A100-SXM4-80GB", cpu_request=4, cpu_limit=8,
        memory_request_gib=32, memory_limit_gib=64, checkpoint_claim="acme-shared-ckpt",
        annotations={"kubesim.trainyard.io/run-seconds": "600"}),
    "ddp_one_node": lambda: job(
        **PROD, job_id=102, name_hint="llama-8b", gpus_per_replica=8,
        gpu_product="NVIDIA-H800", cpu_request=64, cpu_limit=96, memory_request_gib=512,
        memory_limit_gib=1024, checkpoint_storage_class="fast-ssd", checkpoint_size_gib=500,
        args=("--epochs", "3"), env={"NCCL_DEBUG": "WARN"}),
    "multi_node": lambda: job(
        **PROD, job_id=103, name_hint="llama-70b", worker_replicas=3, gpus_per_replica=8,
        gpu_product="NVIDIA-H800", cpu_request=64, cpu_limit=96, memory_request_gib=512,
        memory_limit_gib=1024, checkpoint_storage_class="shared-nfs", checkpoint_size_gib=2048,
        switch="switch-b1", backoff_limit=5),
    "mig": lambda: job(
        **BATCH, job_id=104, name_hint="notebook-eval", gpus_per_replica=1,
        mig_profile="1g.10gb", cpu_request="0.5", cpu_limit=2, memory_request_gib=4,
        memory_limit_gib=8, image="python:3.12-slim", command=("python", "eval.py")),
    "cpu_only": lambda: job(
        **BATCH, job_id=105, cpu_request=2, cpu_limit=4, memory_request_gib=8,
        memory_limit_gib=16, image="python:3.12-slim", command=("python", "prep.py"),
        checkpoint_path="/work/ckpt", backoff_limit=0, shm_gib=1),
    "dedicated": lambda: job(
        **DEV, job_id=106, worker_replicas=1, gpus_per_replica=4,
        gpu_product="NVIDIA-A100-SXM4-80GB",
        cpu_request=16, cpu_limit=32, memory_request_gib=128, memory_limit_gib=256,
        switch="switch-a1", placement=dedicated_placement("acme"),
        checkpoint_claim="acme-ckpt"),
    "resume": lambda: job(
        **DEV, job_id=107, name_hint="resnet", gpus_per_replica=2,
        gpu_product="NVIDIA-A100-SXM4-80GB", cpu_request=8, cpu_limit=16,
        memory_request_gib=64, memory_limit_gib=128, checkpoint_storage_class="fast-ssd",
        checkpoint_size_gib=100, resume=True, restart_count=2, suspend=False),
}


# --- golden manifests ----------------------------------------------------------------------

GOLDEN: dict[str, tuple[dict, dict | None]] = {}

SINGLE_GPU_TEMPLATE = {
    "metadata": {
        "labels": {
            "app.kubernetes.io/managed-by": "trainyard",
            "trainyard.io/job": "101",
            "trainyard.io/pool": "dev",
            "trainyard.io/tenant": "acme",
            "trainyard.io/tier": "development",
        },
        "annotations": {"kubesim.trainyard.io/run-seconds": "600"},
    },
    "spec": {
        "serviceAccountName": "trainyard-workload",
        "automountServiceAccountToken": False,
        "priorityClassName": "trainyard-development",
        "terminationGracePeriodSeconds": 300,
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": "pytorch",
                "image": "registry.example.org:5000/ml/llm-ft:1.4",
                "command": ["torchrun", "train.py"],
                "env": [
                    {"name": "TRAINYARD_JOB_ID", "value": "101"},
                    {"name": "TRAINYARD_JOB", "value": "tj-101-fine-tune-bert"},
                    {"name": "TRAINYARD_TENANT", "value": "acme"},
                    {"name": "TRAINYARD_POOL", "value": "dev"},
                    {"name": "TRAINYARD_TIER", "value": "development"},
                    {"name": "TRAINYARD_CHECKPOINT_PERSISTENT", "value": "1"},
                    {"name": "TRAINYARD_CHECKPOINT_DIR", "value": "/checkpoints"},
                    {"name": "TRAINYARD_CHECKPOINT_INTERVAL_SECONDS", "value": "300"},
                    {"name": "TRAINYARD_RESUME", "value": "0"},
                    {"name": "TRAINYARD_RESTART_COUNT", "value": "0"},
                    {"name": "TRAINYARD_GRACE_SECONDS", "value": "300"},
                ],
                "resources": {
                    "requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"},
                    "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
                },
                "volumeMounts": [
                    {"name": "checkpoints", "mountPath": "/checkpoints"},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                ],
            }
        ],
        "volumes": [
            {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "acme-shared-ckpt"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}},
        ],
    },
}
GOLDEN["single_gpu"] = (
    {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "tj-101-fine-tune-bert",
            "namespace": "ty-acme-dev",
            "labels": {
                "app.kubernetes.io/managed-by": "trainyard",
                "trainyard.io/job": "101",
                "trainyard.io/pool": "dev",
                "trainyard.io/tenant": "acme",
                "trainyard.io/tier": "development",
            },
        },
        "spec": {
            "nprocPerNode": "1",
            "runPolicy": {
                "cleanPodPolicy": "Running",
                "suspend": True,
                "activeDeadlineSeconds": 86400,
                "backoffLimit": 3,
            },
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": SINGLE_GPU_TEMPLATE,
                }
            },
        },
    },
    None,
)

DDP_ONE_NODE_TEMPLATE = {
    "metadata": {
        "labels": {
            "app.kubernetes.io/managed-by": "trainyard",
            "trainyard.io/job": "102",
            "trainyard.io/pool": "prod",
            "trainyard.io/tenant": "acme",
            "trainyard.io/tier": "production",
        }
    },
    "spec": {
        "serviceAccountName": "trainyard-workload",
        "automountServiceAccountToken": False,
        "priorityClassName": "trainyard-production",
        "terminationGracePeriodSeconds": 30,
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H800"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": "pytorch",
                "image": "registry.example.org:5000/ml/llm-ft:1.4",
                "command": ["torchrun", "train.py"],
                "args": ["--epochs", "3"],
                "env": [
                    {"name": "TRAINYARD_JOB_ID", "value": "102"},
                    {"name": "TRAINYARD_JOB", "value": "tj-102-llama-8b"},
                    {"name": "TRAINYARD_TENANT", "value": "acme"},
                    {"name": "TRAINYARD_POOL", "value": "prod"},
                    {"name": "TRAINYARD_TIER", "value": "production"},
                    {"name": "TRAINYARD_CHECKPOINT_PERSISTENT", "value": "1"},
                    {"name": "TRAINYARD_CHECKPOINT_DIR", "value": "/checkpoints"},
                    {"name": "TRAINYARD_CHECKPOINT_INTERVAL_SECONDS", "value": "1800"},
                    {"name": "TRAINYARD_RESUME", "value": "0"},
                    {"name": "TRAINYARD_RESTART_COUNT", "value": "0"},
                    {"name": "TRAINYARD_GRACE_SECONDS", "value": "30"},
                    {"name": "NCCL_DEBUG", "value": "WARN"},
                ],
                "resources": {
                    "requests": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                    "limits": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"},
                },
                "volumeMounts": [
                    {"name": "checkpoints", "mountPath": "/checkpoints"},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                ],
            }
        ],
        "volumes": [
            {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "tj-102-llama-8b-ckpt"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
        ],
    },
}
GOLDEN["ddp_one_node"] = (
    {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "tj-102-llama-8b",
            "namespace": "ty-acme-prod",
            "labels": {
                "app.kubernetes.io/managed-by": "trainyard",
                "trainyard.io/job": "102",
                "trainyard.io/pool": "prod",
                "trainyard.io/tenant": "acme",
                "trainyard.io/tier": "production",
            },
        },
        "spec": {
            "nprocPerNode": "8",
            "runPolicy": {
                "cleanPodPolicy": "Running",
                "suspend": True,
                "activeDeadlineSeconds": 86400,
                "backoffLimit": 3,
            },
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": DDP_ONE_NODE_TEMPLATE,
                }
            },
        },
    },
    {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "tj-102-llama-8b-ckpt",
            "namespace": "ty-acme-prod",
            "labels": {
                "app.kubernetes.io/managed-by": "trainyard",
                "trainyard.io/job": "102",
                "trainyard.io/pool": "prod",
                "trainyard.io/tenant": "acme",
                "trainyard.io/tier": "production",
            },
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "fast-ssd",
            "resources": {"requests": {"storage": "500Gi"}},
        },
    },
)

MULTI_NODE_TEMPLATE = {
    "metadata": {
        "labels": {
            "app.kubernetes.io/managed-by": "trainyard",
            "trainyard.io/job": "103",
            "trainyard.io/pool": "prod",
            "trainyard.io/tenant": "acme",
            "trainyard.io/tier": "production",
        }
    },
    "spec": {
        "serviceAccountName": "trainyard-workload",
        "automountServiceAccountToken": False,
        "priorityClassName": "trainyard-production",
        "terminationGracePeriodSeconds": 30,
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H800"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "trainyard.io/switch",
                                    "operator": "In",
                                    "values": ["switch-b1"],
                                }
                            ]
                        }
                    ]
                }
            }
        },
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": "pytorch",
                "image": "registry.example.org:5000/ml/llm-ft:1.4",
                "command": ["torchrun", "train.py"],
                "env": [
                    {"name": "TRAINYARD_JOB_ID", "value": "103"},
                    {"name": "TRAINYARD_JOB", "value": "tj-103-llama-70b"},
                    {"name": "TRAINYARD_TENANT", "value": "acme"},
                    {"name": "TRAINYARD_POOL", "value": "prod"},
                    {"name": "TRAINYARD_TIER", "value": "production"},
                    {"name": "TRAINYARD_CHECKPOINT_PERSISTENT", "value": "1"},
                    {"name": "TRAINYARD_CHECKPOINT_DIR", "value": "/checkpoints"},
                    {"name": "TRAINYARD_CHECKPOINT_INTERVAL_SECONDS", "value": "1800"},
                    {"name": "TRAINYARD_RESUME", "value": "0"},
                    {"name": "TRAINYARD_RESTART_COUNT", "value": "0"},
                    {"name": "TRAINYARD_GRACE_SECONDS", "value": "30"},
                ],
                "resources": {
                    "requests": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
                    "limits": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"},
                },
                "volumeMounts": [
                    {"name": "checkpoints", "mountPath": "/checkpoints"},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                ],
            }
        ],
        "volumes": [
            {
                "name": "checkpoints",
                "persistentVolumeClaim": {"claimName": "tj-103-llama-70b-ckpt"},
            },
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
        ],
    },
}
GOLDEN["multi_node"] = (
    {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "tj-103-llama-70b",
            "namespace": "ty-acme-prod",
            "labels": {
                "app.kubernetes.io/managed-by": "trainyard",
                "trainyard.io/job": "103",
                "trainyard.io/pool": "prod",
                "trainyard.io/tenant": "acme",
                "trainyard.io/tier": "production",
            },
        },
        "spec": {
            "nprocPerNode": "8",
            "runPolicy": {
                "cleanPodPolicy": "Running",
                "suspend": True,
                "activeDeadlineSeconds": 86400,
                "backoffLimit": 5,
            },
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": MULTI_NODE_TEMPLATE,
                },
                "Worker": {
                    "replicas": 3,
                    "restartPolicy": "OnFailure",
                    "template": MULTI_NODE_TEMPLATE,
                },
            },
        },
    },
    {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "tj-103-llama-70b-ckpt",
            "namespace": "ty-acme-prod",
            "labels": {
                "app.kubernetes.io/managed-by": "trainyard",
                "trainyard.io/job": "103",
                "trainyard.io/pool": "prod",
                "trainyard.io/tenant": "acme",
                "trainyard.io/tier": "production",
            },
        },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "shared-nfs",
            "resources": {"requests": {"storage": "2Ti"}},
        },
    },
)

MIG_TEMPLATE = {
    "metadata": {
        "labels": {
            "app.kubernetes.io/managed-by": "trainyard",
            "trainyard.io/job": "104",
            "trainyard.io/pool": "dev",
            "trainyard.io/tenant": "acme",
            "trainyard.io/tier": "batch",
        }
    },
    "spec": {
        "serviceAccountName": "trainyard-workload",
        "automountServiceAccountToken": False,
        "priorityClassName": "trainyard-batch",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": "pytorch",
                "image": "python:3.12-slim",
                "command": ["python", "eval.py"],
                "env": [
                    {"name": "TRAINYARD_JOB_ID", "value": "104"},
                    {"name": "TRAINYARD_JOB", "value": "tj-104-notebook-eval"},
                    {"name": "TRAINYARD_TENANT", "value": "acme"},
                    {"name": "TRAINYARD_POOL", "value": "dev"},
                    {"name": "TRAINYARD_TIER", "value": "batch"},
                    {"name": "TRAINYARD_CHECKPOINT_PERSISTENT", "value": "0"},
                    {"name": "TRAINYARD_CHECKPOINT_DIR", "value": "/checkpoints"},
                    {"name": "TRAINYARD_CHECKPOINT_INTERVAL_SECONDS", "value": "300"},
                    {"name": "TRAINYARD_RESUME", "value": "0"},
                    {"name": "TRAINYARD_RESTART_COUNT", "value": "0"},
                    {"name": "TRAINYARD_GRACE_SECONDS", "value": "30"},
                ],
                "resources": {
                    "requests": {"cpu": "500m", "memory": "4Gi", "nvidia.com/mig-1g.10gb": "1"},
                    "limits": {"cpu": "2", "memory": "8Gi", "nvidia.com/mig-1g.10gb": "1"},
                },
                "volumeMounts": [
                    {"name": "checkpoints", "mountPath": "/checkpoints"},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                ],
            }
        ],
        "volumes": [
            {"name": "checkpoints", "emptyDir": {}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "4Gi"}},
        ],
    },
}
GOLDEN["mig"] = (
    {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "tj-104-notebook-eval",
            "namespace": "ty-acme-dev",
            "labels": {
                "app.kubernetes.io/managed-by": "trainyard",
                "trainyard.io/job": "104",
                "trainyard.io/pool": "dev",
                "trainyard.io/tenant": "acme",
                "trainyard.io/tier": "batch",
            },
        },
        "spec": {
            "nprocPerNode": "1",
            "runPolicy": {
                "cleanPodPolicy": "Running",
                "suspend": True,
                "activeDeadlineSeconds": 86400,
                "backoffLimit": 3,
            },
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": MIG_TEMPLATE}
            },
        },
    },
    None,
)

CPU_ONLY_TEMPLATE = {
    "metadata": {
        "labels": {
            "app.kubernetes.io/managed-by": "trainyard",
            "trainyard.io/job": "105",
            "trainyard.io/pool": "dev",
            "trainyard.io/tenant": "acme",
            "trainyard.io/tier": "batch",
        }
    },
    "spec": {
        "serviceAccountName": "trainyard-workload",
        "automountServiceAccountToken": False,
        "priorityClassName": "trainyard-batch",
        "terminationGracePeriodSeconds": 30,
        "containers": [
            {
                "name": "pytorch",
                "image": "python:3.12-slim",
                "command": ["python", "prep.py"],
                "env": [
                    {"name": "TRAINYARD_JOB_ID", "value": "105"},
                    {"name": "TRAINYARD_JOB", "value": "tj-105"},
                    {"name": "TRAINYARD_TENANT", "value": "acme"},
                    {"name": "TRAINYARD_POOL", "value": "dev"},
                    {"name": "TRAINYARD_TIER", "value": "batch"},
                    {"name": "TRAINYARD_CHECKPOINT_PERSISTENT", "value": "0"},
                    {"name": "TRAINYARD_CHECKPOINT_DIR", "value": "/work/ckpt"},
                    {"name": "TRAINYARD_CHECKPOINT_INTERVAL_SECONDS", "value": "300"},
                    {"name": "TRAINYARD_RESUME", "value": "0"},
                    {"name": "TRAINYARD_RESTART_COUNT", "value": "0"},
                    {"name": "TRAINYARD_GRACE_SECONDS", "value": "30"},
                ],
                "resources": {
                    "requests": {"cpu": "2", "memory": "8Gi"},
                    "limits": {"cpu": "4", "memory": "16Gi"},
                },
                "volumeMounts": [
                    {"name": "checkpoints", "mountPath": "/work/ckpt"},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                ],
            }
        ],
        "volumes": [
            {"name": "checkpoints", "emptyDir": {}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
        ],
    },
}
GOLDEN["cpu_only"] = (
    {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "tj-105",
            "namespace": "ty-acme-dev",
            "labels": {
                "app.kubernetes.io/managed-by": "trainyard",
                "trainyard.io/job": "105",
                "trainyard.io/pool": "dev",
                "trainyard.io/tenant": "acme",
                "trainyard.io/tier": "batch",
            },
        },
        "spec": {
            "nprocPerNode": "1",
            "runPolicy": {
                "cleanPodPolicy": "Running",
                "suspend": True,
                "activeDeadlineSeconds": 86400,
                "backoffLimit": 0,
            },
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": CPU_ONLY_TEMPLATE,
                }
            },
        },
    },
    None,
)

DEDICATED_TEMPLATE = {
    "metadata": {
        "labels": {
            "app.kubernetes.io/managed-by": "trainyard",
            "trainyard.io/job": "106",
            "trainyard.io/pool": "dev",
            "trainyard.io/tenant": "acme",
            "trainyard.io/tier": "development",
        }
    },
    "spec": {
        "serviceAccountName": "trainyard-workload",
        "automountServiceAccountToken": False,
        "priorityClassName": "trainyard-development",
        "terminationGracePeriodSeconds": 300,
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [
                                {
                                    "key": "trainyard.io/dedicated",
                                    "operator": "In",
                                    "values": ["acme"],
                                }
                            ]
                        },
                    }
                ],
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "trainyard.io/switch",
                                    "operator": "In",
                                    "values": ["switch-a1"],
                                }
                            ]
                        }
                    ]
                },
            }
        },
        "tolerations": [
            {
                "key": "trainyard.io/dedicated",
                "operator": "Equal",
                "value": "acme",
                "effect": "NoSchedule",
            },
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        ],
        "containers": [
            {
                "name": "pytorch",
                "image": "registry.example.org:5000/ml/llm-ft:1.4",
                "command": ["torchrun", "train.py"],
                "env": [
                    {"name": "TRAINYARD_JOB_ID", "value": "106"},
                    {"name": "TRAINYARD_JOB", "value": "tj-106"},
                    {"name": "TRAINYARD_TENANT", "value": "acme"},
                    {"name": "TRAINYARD_POOL", "value": "dev"},
                    {"name": "TRAINYARD_TIER", "value": "development"},
                    {"name": "TRAINYARD_CHECKPOINT_PERSISTENT", "value": "1"},
                    {"name": "TRAINYARD_CHECKPOINT_DIR", "value": "/checkpoints"},
                    {"name": "TRAINYARD_CHECKPOINT_INTERVAL_SECONDS", "value": "300"},
                    {"name": "TRAINYARD_RESUME", "value": "0"},
                    {"name": "TRAINYARD_RESTART_COUNT", "value": "0"},
                    {"name": "TRAINYARD_GRACE_SECONDS", "value": "300"},
                ],
                "resources": {
                    "requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "4"},
                    "limits": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "4"},
                },
                "volumeMounts": [
                    {"name": "checkpoints", "mountPath": "/checkpoints"},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                ],
            }
        ],
        "volumes": [
            {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "acme-ckpt"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
        ],
    },
}
GOLDEN["dedicated"] = (
    {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "tj-106",
            "namespace": "ty-acme-dev",
            "labels": {
                "app.kubernetes.io/managed-by": "trainyard",
                "trainyard.io/job": "106",
                "trainyard.io/pool": "dev",
                "trainyard.io/tenant": "acme",
                "trainyard.io/tier": "development",
            },
        },
        "spec": {
            "nprocPerNode": "4",
            "runPolicy": {
                "cleanPodPolicy": "Running",
                "suspend": True,
                "activeDeadlineSeconds": 86400,
                "backoffLimit": 3,
            },
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": DEDICATED_TEMPLATE,
                },
                "Worker": {
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": DEDICATED_TEMPLATE,
                },
            },
        },
    },
    None,
)

RESUME_TEMPLATE = {
    "metadata": {
        "labels": {
            "app.kubernetes.io/managed-by": "trainyard",
            "trainyard.io/job": "107",
            "trainyard.io/pool": "dev",
            "trainyard.io/tenant": "acme",
            "trainyard.io/tier": "development",
        }
    },
    "spec": {
        "serviceAccountName": "trainyard-workload",
        "automountServiceAccountToken": False,
        "priorityClassName": "trainyard-development",
        "terminationGracePeriodSeconds": 300,
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": "pytorch",
                "image": "registry.example.org:5000/ml/llm-ft:1.4",
                "command": ["torchrun", "train.py"],
                "env": [
                    {"name": "TRAINYARD_JOB_ID", "value": "107"},
                    {"name": "TRAINYARD_JOB", "value": "tj-107-resnet"},
                    {"name": "TRAINYARD_TENANT", "value": "acme"},
                    {"name": "TRAINYARD_POOL", "value": "dev"},
                    {"name": "TRAINYARD_TIER", "value": "development"},
                    {"name": "TRAINYARD_CHECKPOINT_PERSISTENT", "value": "1"},
                    {"name": "TRAINYARD_CHECKPOINT_DIR", "value": "/checkpoints"},
                    {"name": "TRAINYARD_CHECKPOINT_INTERVAL_SECONDS", "value": "300"},
                    {"name": "TRAINYARD_RESUME", "value": "1"},
                    {"name": "TRAINYARD_RESTART_COUNT", "value": "2"},
                    {"name": "TRAINYARD_GRACE_SECONDS", "value": "300"},
                ],
                "resources": {
                    "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"},
                    "limits": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "2"},
                },
                "volumeMounts": [
                    {"name": "checkpoints", "mountPath": "/checkpoints"},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                ],
            }
        ],
        "volumes": [
            {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "tj-107-resnet-ckpt"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
        ],
    },
}
GOLDEN["resume"] = (
    {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "tj-107-resnet",
            "namespace": "ty-acme-dev",
            "labels": {
                "app.kubernetes.io/managed-by": "trainyard",
                "trainyard.io/job": "107",
                "trainyard.io/pool": "dev",
                "trainyard.io/tenant": "acme",
                "trainyard.io/tier": "development",
            },
        },
        "spec": {
            "nprocPerNode": "2",
            "runPolicy": {
                "cleanPodPolicy": "Running",
                "suspend": False,
                "activeDeadlineSeconds": 86400,
                "backoffLimit": 3,
            },
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": RESUME_TEMPLATE}
            },
        },
    },
    {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "tj-107-resnet-ckpt",
            "namespace": "ty-acme-dev",
            "labels": {
                "app.kubernetes.io/managed-by": "trainyard",
                "trainyard.io/job": "107",
                "trainyard.io/pool": "dev",
                "trainyard.io/tenant": "acme",
                "trainyard.io/tier": "development",
            },
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "fast-ssd",
            "resources": {"requests": {"storage": "100Gi"}},
        },
    },
)


# --- golden tests and validation -------------------------------------------------------------


def test_every_spec_has_a_golden_manifest():
    assert set(SPECS) == set(GOLDEN)


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_pytorchjob_matches_golden_and_validates(case):
    spec = SPECS[case]()
    want_job, want_pvc = GOLDEN[case]
    job = manifests.build_pytorchjob(spec)
    assert job == want_job
    validate_pytorchjob(job)  # CRD openAPIV3Schema + the operator's webhook rules
    assert manifests.build_checkpoint_pvc(spec) == want_pvc


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_pod_templates_and_pvc_are_valid_core_objects(case):
    """Strict core schemas catch typos inside the pod spec that the CRD (which does not
    forbid unknown fields) would let through to be pruned."""
    spec = SPECS[case]()
    job = manifests.build_pytorchjob(spec)
    for rtype, rspec in job["spec"]["pytorchReplicaSpecs"].items():
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{spec.name}-{rtype.lower()}-0",
                            **rspec["template"]["metadata"]},
               "spec": rspec["template"]["spec"]}
        kubernetes_validate.validate(pod, "1.33", strict=True)
    pvc = manifests.build_checkpoint_pvc(spec)
    if pvc is not None:
        kubernetes_validate.validate(pvc, "1.33", strict=True)


def test_builders_are_pure_and_return_fresh_objects():
    spec = SPECS["dedicated"]()
    first, second = manifests.build_pytorchjob(spec), manifests.build_pytorchjob(spec)
    assert first == second
    reps = first["spec"]["pytorchReplicaSpecs"]
    assert reps["Master"]["template"] is not reps["Worker"]["template"]
    reps["Master"]["template"]["spec"]["tolerations"].clear()
    reps["Worker"]["template"]["spec"]["affinity"].clear()
    assert manifests.build_pytorchjob(spec) == second
    assert spec == SPECS["dedicated"]()  # the spec was not touched either


def test_spec_is_deeply_immutable():
    placement = dedicated_placement("acme")
    env = {"A": "1"}
    spec = JobSpec(**{**BASE, **DEV}, job_id=1, env=env, placement=placement)
    env["B"] = "2"
    placement["tolerations"].append({"key": "x"})
    assert dict(spec.env) == {"A": "1"}
    assert len(spec.placement["tolerations"]) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.worker_replicas = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.placement["tolerations"][0]["key"] = "y"  # type: ignore[index]


def test_mig_with_the_base_product_selects_it():
    """Mixed strategy keeps the base product label; a MIG profile name alone exists on
    several models, so the caller may pin the model."""
    spec = dataclasses.replace(SPECS["mig"](), gpu_product="NVIDIA-A100-SXM4-80GB")
    pod = manifests.build_pytorchjob(spec)["spec"]["pytorchReplicaSpecs"]["Master"]
    assert pod["template"]["spec"]["nodeSelector"] == {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert manifests.build_pytorchjob(spec)["spec"]["nprocPerNode"] == "1"


def test_switch_is_anded_into_every_required_term_of_the_placement():
    placement = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
        ]}}}}
    spec = JobSpec(**{**BASE, **PROD}, job_id=9, worker_replicas=1, switch="switch-b1",
                   placement=placement)
    template = manifests.build_pytorchjob(spec)["spec"]["pytorchReplicaSpecs"]["Worker"]
    terms = template["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    switch = {"key": "trainyard.io/switch", "operator": "In", "values": ["switch-b1"]}
    assert terms == [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}, switch]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
         "matchExpressions": [switch]},
    ]
    assert len(spec.placement["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"]) == 1  # the spec's own placement is unchanged


def test_merge_node_affinity_without_required_terms_is_a_copy():
    affinity = dedicated_placement("acme")["affinity"]
    merged = manifests.merge_node_affinity(affinity, [])
    assert merged == affinity and merged is not affinity
    assert manifests.merge_node_affinity(None, []) == {}


def test_suspend_and_resume_patches():
    assert manifests.pytorchjob_suspend_patch(True) == {"spec": {"runPolicy": {"suspend": True}}}
    assert manifests.pytorchjob_suspend_patch(False) == {
        "spec": {"runPolicy": {"suspend": False}}}
    spec = dataclasses.replace(SPECS["multi_node"](), resume=True, restart_count=4)
    patch = manifests.pytorchjob_resume_patch(spec)
    assert patch == {"spec": {
        "runPolicy": {"suspend": False},
        "pytorchReplicaSpecs": manifests.build_pytorchjob(spec)["spec"]["pytorchReplicaSpecs"],
    }}
    env = patch["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "env"]
    assert {"name": "TRAINYARD_RESUME", "value": "1"} in env
    assert {"name": "TRAINYARD_RESTART_COUNT", "value": "4"} in env


def test_shm_defaults_to_half_the_memory_limit_capped_at_64gi():
    def shm(**kw) -> str:
        spec = JobSpec(**{**BASE, **DEV, "job_id": 1, **kw})
        volumes = manifests.build_pytorchjob(spec)["spec"]["pytorchReplicaSpecs"]["Master"][
            "template"]["spec"]["volumes"]
        return next(v for v in volumes if v["name"] == "dshm")["emptyDir"]["sizeLimit"]

    assert shm(memory_request_gib=1, memory_limit_gib=3) == "1536Mi"
    assert shm(memory_request_gib="0.5", memory_limit_gib="0.5") == "256Mi"
    assert shm(memory_request_gib=64, memory_limit_gib=200) == "64Gi"
    assert shm(memory_request_gib=64, memory_limit_gib=200, shm_gib=100) == "100Gi"


# --- CRD and webhook validation catches what the API server / operator would ----------------


def _valid_job() -> dict:
    return manifests.build_pytorchjob(SPECS["multi_node"]())


def test_crd_validation_reports_schema_errors_and_unknown_fields():
    job = _valid_job()
    job["spec"]["runPolicy"]["suspend"] = "yes"
    job["spec"]["runPolicy"]["backoffLimit"] = "3"
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "3"
    job["spec"]["runPolicy"]["suspnd"] = True
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0][
        "resoures"] = {}
    errors = schema_errors(job)
    assert ".spec.runPolicy.suspend: 'yes' is not of type 'boolean'" in errors
    assert ".spec.runPolicy.backoffLimit: '3' is not of type 'integer'" in errors
    assert ".spec.pytorchReplicaSpecs.Worker.replicas: '3' is not of type 'integer'" in errors
    assert ".spec.runPolicy.suspnd: unknown field (the API server would drop it)" in errors
    assert (".spec.pytorchReplicaSpecs.Master.template.spec.containers.0.resoures: "
            "unknown field (the API server would drop it)") in errors
    with pytest.raises(CrdValidationError) as info:
        validate_pytorchjob(job)
    assert ".spec.pytorchReplicaSpecs.Worker.replicas: must be an integer >= 1, got '3'" in (
        info.value.errors)  # the webhook rule reports it too
    assert isinstance(info.value, ValueError) and len(info.value.errors) == 6


def test_crd_validation_requires_replica_specs():
    job = _valid_job()
    del job["spec"]["pytorchReplicaSpecs"]
    assert any("'pytorchReplicaSpecs' is a required property" in e for e in schema_errors(job))
    assert pytorchjob_errors(job) == [".spec.pytorchReplicaSpecs: required"]


@pytest.mark.parametrize(("mutate", "error"), [
    (lambda j: j["spec"]["pytorchReplicaSpecs"]["Master"].update(replicas=2),
     ".spec.pytorchReplicaSpecs.Master.replicas: must be 1 for Master, got 2"),
    (lambda j: j["spec"]["pytorchReplicaSpecs"]["Worker"].update(replicas=0),
     ".spec.pytorchReplicaSpecs.Worker.replicas: must be an integer >= 1, got 0"),
    (lambda j: j["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
     .update(name="trainer"),
     ".spec.pytorchReplicaSpecs.Master.template.spec.containers: needs a container named "
     "pytorch"),
    (lambda j: j["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
     .pop("image"),
     ".spec.pytorchReplicaSpecs.Worker.template.spec.containers.0.image: required"),
    (lambda j: j["spec"]["pytorchReplicaSpecs"].update(
        Chief=j["spec"]["pytorchReplicaSpecs"]["Worker"]),
     ".spec.pytorchReplicaSpecs.Chief: replica type must be one of ('Master', 'Worker')"),
    (lambda j: j["spec"]["pytorchReplicaSpecs"]["Master"].pop("replicas"),
     ".spec.pytorchReplicaSpecs.Master.replicas: must be 1 for Master, got None"),
    (lambda j: j["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"].update(
        containers=[]),
     ".spec.pytorchReplicaSpecs.Worker.template.spec.containers: must be specified"),
    (lambda j: j["spec"]["runPolicy"].update(managedBy="me"),
     ".spec.runPolicy.managedBy: 'me' not in ('kubeflow.org/training-operator', "
     "'kueue.x-k8s.io/multikueue')"),
    (lambda j: j["metadata"].update(name="1-job"),
     ".metadata.name: '1-job' is not a DNS-1035 label"),
    (lambda j: j["spec"]["runPolicy"].update(cleanPodPolicy="Sometimes"),
     ".spec.runPolicy.cleanPodPolicy: 'Sometimes' not in ('None', 'Running', 'All')"),
    (lambda j: j["spec"]["pytorchReplicaSpecs"]["Worker"].update(restartPolicy="Maybe"),
     ".spec.pytorchReplicaSpecs.Worker.restartPolicy: 'Maybe' not in "
     "('Always', 'OnFailure', 'Never', 'ExitCode')"),
])
def test_webhook_rules(mutate, error):
    job = copy.deepcopy(_valid_job())
    mutate(job)
    assert error in pytorchjob_errors(job)
    with pytest.raises(CrdValidationError) as info:
        validate_pytorchjob(job)
    assert error in info.value.errors


def test_validate_rejects_other_kinds():
    with pytest.raises(CrdValidationError, match=r"not a kubeflow\.org/v1 PyTorchJob"):
        validate_pytorchjob({"apiVersion": "v1", "kind": "Pod"})
    with pytest.raises(LookupError):
        schema_errors({"apiVersion": "kubeflow.org/v2", "kind": "PyTorchJob"})


# --- JobSpec validation: every ValueError names its field -----------------------------------

GOOD_IMAGES = [
    "python",
    "python:3.12-slim",
    "library/python:3.12",
    "nvcr.io/nvidia/pytorch:24.05-py3",
    "registry.example.org:5000/ml/llm-ft:1.4",
    "localhost:5000/team/img",
    "localhost/img:dev",
    "ghcr.io/org/repo@sha256:" + "a" * 64,
    "ghcr.io/org/repo:v1@sha256:" + "0123456789abcdef" * 4,
    "my_org/my__img/a-b--c.d:TAG_1.x",
    "10.0.0.1:5000/x",
]

BAD_IMAGES = [
    "",
    " ",
    "python ",
    "ubuntu latest",
    "Ubuntu:22.04",
    "registry.example.org/Team/img:1",
    "img:",
    ":tag",
    "img:tag with-space",
    "img:-tag",
    "img:" + "t" * 129,
    "img@sha256:abc",
    "img@md5:" + "a" * 32,
    "img@sha256:" + "A" * 64,
    "-img",
    "img-",
    "img//x",
    "/img",
    "img/",
    "registry.example.org:port/img",
    "-registry.example.org/img",
    "a" * 256,
    "img\n",
    "img:tag:again",
]


@pytest.mark.parametrize("ref", GOOD_IMAGES)
def test_good_image_references(ref):
    assert validate_image(ref) == ref
    JobSpec(**{**BASE, **DEV, "job_id": 1, "image": ref})


@pytest.mark.parametrize("ref", BAD_IMAGES)
def test_bad_image_references(ref):
    with pytest.raises(ValueError, match=r"^image: "):
        JobSpec(**{**BASE, **DEV, "job_id": 1, "image": ref})


A100 = {"gpus_per_replica": 1, "gpu_product": "NVIDIA-A100-SXM4-80GB"}

BAD_SPECS = [
    # (overrides, field the message must start with)
    ({"job_id": "Job 1"}, "job_id"),
    ({"job_id": -1}, "job_id"),
    ({"tenant_slug": ""}, "tenant_slug"),
    ({"pool": "staging"}, "pool"),
    ({"tier": "urgent"}, "tier"),
    ({"command": "python train.py"}, "command"),
    ({"args": ("--lr", 0.1)}, "args"),
    ({"env": {"TRAINYARD_RESUME": "1"}}, "env"),
    ({"env": {"trainyard_job_id": "1"}}, "env"),
    ({"env": {"RANK": "0"}}, "env"),
    ({"env": {"PET_NNODES": "2"}}, "env"),
    ({"env": {"1BAD": "x"}}, "env"),
    ({"env": {"A-B": "x"}}, "env"),
    ({"env": {"": "x"}}, "env"),
    ({"env": {"N": 1}}, "env"),
    ({"worker_replicas": -1}, "worker_replicas"),
    ({"worker_replicas": 1.5}, "worker_replicas"),
    ({"worker_replicas": True}, "worker_replicas"),
    ({"gpus_per_replica": -1}, "gpus_per_replica"),
    ({"gpus_per_replica": 8}, "gpu_product"),  # GPUs with no model
    ({"gpu_product": "NVIDIA-H800"}, "gpu_product"),  # model with no GPUs
    ({"gpus_per_replica": 1, "gpu_product": "NVIDIA H800"}, "gpu_product"),
    ({"gpus_per_replica": 1, "mig_profile": "1g.10gb",
      "gpu_product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}, "gpu_product"),  # MIG conflict
    ({"gpus_per_replica": 1, "mig_profile": "1g.10gb",
      "gpu_product": "NVIDIA-L40S-SHARED"}, "gpu_product"),
    ({"gpus_per_replica": 2, "mig_profile": "1g.10gb"}, "mig_profile"),
    ({"mig_profile": "1g.10gb"}, "mig_profile"),
    ({"gpus_per_replica": 1, "mig_profile": "1g10gb"}, "mig_profile"),
    ({"cpu_request": 8, "cpu_limit": 4}, "cpu_request"),
    ({"memory_request_gib": 65, "memory_limit_gib": 64}, "memory_request_gib"),
    ({"cpu_request": 0}, "cpu_request"),
    ({"cpu_request": "0.0001"}, "cpu_request"),  # rounds down to 0
    ({"memory_request_gib": "0.0001"}, "memory_request_gib"),
    ({"cpu_limit": "1.0001"}, "cpu_limit"),  # limits are not rounded
    ({"memory_limit_gib": -4}, "memory_limit_gib"),
    ({"memory_request_gib": "lots"}, "memory_request_gib"),
    ({"shm_gib": 5}, "shm_gib"),  # more than the 4 GiB memory limit
    ({"max_run_seconds": 30 * 24 * 3600 + 1}, "max_run_seconds"),  # absurd run time
    ({"max_run_seconds": 0}, "max_run_seconds"),
    ({"max_run_seconds": 3600.0}, "max_run_seconds"),
    ({"grace_seconds": -1}, "grace_seconds"),
    ({"checkpoint_interval_seconds": 0}, "checkpoint_interval_seconds"),
    ({"backoff_limit": -1}, "backoff_limit"),
    ({"restart_count": -1}, "restart_count"),
    ({"resume": "yes"}, "resume"),
    ({"suspend": 0}, "suspend"),
    ({"checkpoint_claim": "My Claim"}, "checkpoint_claim"),
    ({"checkpoint_claim": "c", "checkpoint_storage_class": "fast-ssd",
      "checkpoint_size_gib": 10}, "checkpoint_claim"),
    ({"checkpoint_storage_class": "fast-ssd"}, "checkpoint_storage_class"),
    ({"checkpoint_size_gib": 10}, "checkpoint_storage_class"),
    ({"checkpoint_storage_class": "Fast SSD", "checkpoint_size_gib": 10},
     "checkpoint_storage_class"),
    ({"checkpoint_storage_class": "fast-ssd", "checkpoint_size_gib": 0}, "checkpoint_size_gib"),
    ({"checkpoint_path": "checkpoints"}, "checkpoint_path"),
    ({"checkpoint_path": "/dev/shm"}, "checkpoint_path"),
    ({"checkpoint_path": "/"}, "checkpoint_path"),
    ({"checkpoint_path": "/ck pt"}, "checkpoint_path"),
    ({"switch": "switch a"}, "switch"),
    ({"placement": {"nodeName": "n1"}}, "placement"),
    ({**A100, "placement": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H800"}}},
     "placement"),
    ({"annotations": {"kubesim.trainyard.io/run-seconds": 60}}, "annotations"),
    ({"annotations": {"Bad Prefix/run-seconds": "60"}}, "annotations"),
    ({"annotations": {"kubesim.trainyard.io/": "60"}}, "annotations"),
    ({"annotations": {"": "60"}}, "annotations"),
]


@pytest.mark.parametrize(("overrides", "field"), BAD_SPECS,
                         ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD_SPECS)])
def test_bad_spec_raises_value_error_naming_the_field(overrides, field):
    with pytest.raises(ValueError) as info:
        JobSpec(**{**BASE, **DEV, "job_id": 1, **overrides})
    assert str(info.value).startswith(f"{field}: "), str(info.value)


def test_requests_are_rounded_down_to_a_millicore_and_a_mib():
    spec = JobSpec(**{**BASE, **DEV, "job_id": 1, "cpu_request": Decimal("1.2345"),
                      "cpu_limit": 2, "memory_request_gib": Decimal("57.600"),
                      "memory_limit_gib": 64})
    assert spec.cpu_request == Decimal("1.234")
    assert spec.memory_request_gib == Decimal(58982) / 1024  # 57.6 GiB = 58982.4 MiB
    resources = manifests.build_pytorchjob(spec)["spec"]["pytorchReplicaSpecs"]["Master"][
        "template"]["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "1234m", "memory": "58982Mi"}
    assert resources["limits"] == {"cpu": "2", "memory": "64Gi"}
    assert JobSpec(**{**BASE, **DEV, "job_id": 1, "cpu_request": 1}).cpu_request == 1


def test_limits_at_the_edges_are_accepted():
    spec = JobSpec(**{**BASE, **DEV, "job_id": 1, "max_run_seconds": 30 * 24 * 3600,
                      "cpu_request": "0.25", "cpu_limit": "0.25", "grace_seconds": 0,
                      "backoff_limit": 0, "worker_replicas": 0})
    assert spec.replicas == 1 and spec.gpu_resource is None
    assert spec.checkpoint_claim_name is None


# --- end to end against kubesim over HTTP ---------------------------------------------------

PJ = ("kubeflow.org/v1", "PyTorchJob")


def _conditions(client, spec: JobSpec) -> dict[str, str]:
    job = client.read(*PJ, spec.name, spec.namespace)
    return {c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions") or []}


def _pods(client, spec: JobSpec) -> list[dict]:
    pods = client.list_objects("v1", "Pod", spec.namespace,
                               label_selector=f"trainyard.io/job={spec.job_id}")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _env(pod: dict) -> dict[str, str]:
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "pytorch")
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


def test_pytorchjob_lifecycle_against_kubesim(cluster):
    started = time.perf_counter()
    client = get_client()
    pool = PoolSpec(tenant_slug="acme", pool="dev", tenant_group="oidc:acme")
    converge(client, [*manifests.desired_cluster_objects(), *manifests.desired_pool_objects(pool)])

    # A GPU model and a switch with a node of >= 8 whole GPUs, read from the nodes.
    nodes = {n["metadata"]["name"]: n for n in client.list_objects("v1", "Node")}
    candidates = sorted(
        (n["metadata"]["labels"]["nvidia.com/gpu.product"],
         n["metadata"]["labels"]["trainyard.io/switch"])
        for n in nodes.values()
        if int(n["status"]["allocatable"].get("nvidia.com/gpu", "0")) >= 8)
    assert candidates, "the small profile has whole-GPU nodes"
    product, switch = candidates[0]

    spec = JobSpec(
        **{**BASE, **DEV, "grace_seconds": 20}, job_id=501, name_hint="e2e",
        worker_replicas=1,
        gpus_per_replica=4, gpu_product=product, switch=switch, cpu_request=4, cpu_limit=8,
        memory_request_gib=16, memory_limit_gib=32, checkpoint_storage_class="fast-ssd",
        checkpoint_size_gib=10, annotations={"kubesim.trainyard.io/run-seconds": "120"})
    pvc, job = manifests.build_checkpoint_pvc(spec), manifests.build_pytorchjob(spec)
    assert pvc is not None
    validate_pytorchjob(job)
    _, created = client.create_if_absent(pvc)
    assert created
    stored, created = client.create_if_absent(job)
    assert created and stored["spec"]["runPolicy"]["suspend"] is True
    assert client.create_if_absent(job)[1] is False  # create-once: a second call is a no-op

    # Suspended: the operator creates no pods.
    cluster.advance(10)
    assert _pods(client, spec) == []
    assert _conditions(client, spec).get("Suspended") == "True"

    # Admitted: un-suspend; master and worker start on nodes of the model, under one switch.
    client.patch(*PJ, spec.name, manifests.pytorchjob_suspend_patch(False), spec.namespace)
    cluster.advance(10)
    pods = _pods(client, spec)
    assert sorted(p["metadata"]["name"] for p in pods) == [
        f"{spec.name}-master-0", f"{spec.name}-worker-0"]
    for pod in pods:
        assert pod["status"]["phase"] == "Running"
        labels = nodes[pod["spec"]["nodeName"]]["metadata"]["labels"]
        assert labels["nvidia.com/gpu.product"] == product
        assert labels["trainyard.io/switch"] == switch
        assert _env(pod)["TRAINYARD_CHECKPOINT_DIR"] == "/checkpoints"
        assert _env(pod)["TRAINYARD_RESTART_COUNT"] == "0"
        claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]
                  if "persistentVolumeClaim" in v]
        assert claims == [f"{spec.name}-ckpt"]
    assert _conditions(client, spec).get("Running") == "True"
    bound = client.read("v1", "PersistentVolumeClaim", f"{spec.name}-ckpt", spec.namespace)
    assert bound["status"]["phase"] == "Bound"

    # Preempted: suspend; the pods get their grace period, then are gone.
    client.patch(*PJ, spec.name, manifests.pytorchjob_suspend_patch(True), spec.namespace)
    cluster.advance(spec.grace_seconds + 5)
    assert client.list_objects("v1", "Pod", spec.namespace,
                               label_selector=f"trainyard.io/job={spec.job_id}") == []
    assert _conditions(client, spec).get("Suspended") == "True"
    assert client.read("v1", "PersistentVolumeClaim", f"{spec.name}-ckpt", spec.namespace)

    # Resumed: same job, un-suspended with the new restart count; runs to completion.
    resumed = dataclasses.replace(spec, resume=True, restart_count=1)
    client.patch(*PJ, spec.name, manifests.pytorchjob_resume_patch(resumed), spec.namespace)
    cluster.advance(10)
    pods = _pods(client, spec)
    assert len(pods) == 2
    assert all(_env(p)["TRAINYARD_RESUME"] == "1" for p in pods)
    assert all(_env(p)["TRAINYARD_RESTART_COUNT"] == "1" for p in pods)
    validate_pytorchjob({k: v for k, v in client.read(*PJ, spec.name, spec.namespace).items()
                         if k != "status"})
    cluster.advance(130, step=5)
    assert _conditions(client, spec).get("Succeeded") == "True"
    assert time.perf_counter() - started < 10


def test_mig_and_cpu_only_jobs_schedule_in_kubesim(cluster):
    """A MIG job lands on a node offering its mixed-strategy resource (no product
    selector needed); a CPU-only job runs with no GPU (the pool's LimitRange fills in
    ``nvidia.com/gpu: 0``)."""
    client = get_client()
    pool = PoolSpec(tenant_slug="acme", pool="dev", tenant_group="oidc:acme")
    converge(client, [*manifests.desired_cluster_objects(), *manifests.desired_pool_objects(pool)])
    nodes = {n["metadata"]["name"]: n for n in client.list_objects("v1", "Node")}
    mig = dataclasses.replace(SPECS["mig"](), suspend=False)
    cpu = dataclasses.replace(SPECS["cpu_only"](), suspend=False)
    for spec in (mig, cpu):
        client.create_if_absent(manifests.build_pytorchjob(spec))
    cluster.advance(10)
    (mig_pod,) = _pods(client, mig)
    (cpu_pod,) = _pods(client, cpu)
    assert mig_pod["status"]["phase"] == cpu_pod["status"]["phase"] == "Running"
    mig_node = nodes[mig_pod["spec"]["nodeName"]]
    assert int(mig_node["status"]["allocatable"].get("nvidia.com/mig-1g.10gb", "0")) > 0
    assert mig_node["metadata"]["labels"]["nvidia.com/mig.strategy"] == "mixed"
    limits = cpu_pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits.get("nvidia.com/gpu", "0") == "0"
