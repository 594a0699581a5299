"""Job templates for common cases: they fill the submission form, nothing more.

Every template runs the example that follows Trainyard's checkpoint contract,
``examples/train_resumable.py`` (copied into the image at ``/workspace``; see
docs/guides/checkpoints.md). The torchrun templates carry no ``--nnodes`` or
``--nproc-per-node``: the training operator sets ``PET_NNODES`` (the job's pods) and
``PET_NPROC_PER_NODE`` (``nprocPerNode``, one process per GPU) from the submitted job,
and torchrun reads them, so changing the workers or GPUs in the form cannot leave a
stale count in the command.
"""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from core.choices import Tier

# Where the job templates expect examples/train_resumable.py inside the image.
EXAMPLE_SCRIPT = "/workspace/train_resumable.py"

TEMPLATES: dict[str, dict] = {
    "finetune-1gpu": {
        "label": _("Single-GPU fine-tune"),
        "description": _("One worker with one GPU: LoRA or small-model fine-tuning."),
        "workers": 1, "gpus_per_worker": 1, "cpu_per_worker": 8, "memory_gib_per_worker": 64,
        "tier": Tier.DEVELOPMENT, "max_run_seconds": 6 * 3600,
        "command": ["python", EXAMPLE_SCRIPT], "args": ["--steps", "20000"],
    },
    "ddp-8gpu": {
        "label": _("DDP on one node (8 GPUs)"),
        "description": _("One worker with 8 GPUs, PyTorch DistributedDataParallel."),
        "workers": 1, "gpus_per_worker": 8, "cpu_per_worker": 64, "memory_gib_per_worker": 512,
        "tier": Tier.DEVELOPMENT, "max_run_seconds": 24 * 3600,
        "command": ["torchrun", EXAMPLE_SCRIPT], "args": ["--steps", "50000"],
    },
    "multinode-32gpu": {
        "label": _("Multi-node (4 x 8 GPUs)"),
        "description": _("Four workers with 8 GPUs each under one switch; torchrun "
                         "rendezvous through the master."),
        "workers": 4, "gpus_per_worker": 8, "cpu_per_worker": 64, "memory_gib_per_worker": 512,
        "tier": Tier.PRODUCTION, "max_run_seconds": 3 * 86400,
        "command": ["torchrun", EXAMPLE_SCRIPT], "args": ["--steps", "100000"],
    },
}
