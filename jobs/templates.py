"""Job templates for common cases: they fill the submission form, nothing more."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

TEMPLATES: dict[str, dict] = {
    "finetune-1gpu": {
        "label": _("Single-GPU fine-tune"),
        "description": _("One worker with one GPU: LoRA or small-model fine-tuning."),
        "workers": 1, "gpus_per_worker": 1, "cpu_per_worker": 8, "memory_gib_per_worker": 64,
        "tier": "development", "max_run_seconds": 6 * 3600,
        "command": ["python", "train.py"], "args": ["--epochs", "3"],
    },
    "ddp-8gpu": {
        "label": _("DDP on one node (8 GPUs)"),
        "description": _("One worker with 8 GPUs, PyTorch DistributedDataParallel."),
        "workers": 1, "gpus_per_worker": 8, "cpu_per_worker": 64, "memory_gib_per_worker": 512,
        "tier": "development", "max_run_seconds": 24 * 3600,
        "command": ["torchrun", "--nproc-per-node=8", "train.py"], "args": [],
    },
    "multinode-32gpu": {
        "label": _("Multi-node (4 x 8 GPUs)"),
        "description": _("Four workers with 8 GPUs each under one switch; torchrun "
                         "rendezvous through the master."),
        "workers": 4, "gpus_per_worker": 8, "cpu_per_worker": 64, "memory_gib_per_worker": 512,
        "tier": "production", "max_run_seconds": 3 * 86400,
        "command": ["torchrun", "--nnodes=4", "--nproc-per-node=8", "train.py"], "args": [],
    },
}
