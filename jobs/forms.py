"""The job submission form: shapes what people type into the service's data."""

from __future__ import annotations

import shlex
from collections.abc import Collection
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from core.choices import PoolKind, Tier
from core.forms import DecimalField
from core.resources import extended
from jobs import validation as v
from jobs.choices import JobKind
from jobs.templates import TEMPLATES
from k8s_sync.specs import MAX_RUN_SECONDS
from k8s_sync.templatetags.k8s_sync import mib as mib_label
from k8s_sync.templatetags.k8s_sync import sharing as sharing_label
from tenants.storage import iops_tiers


class JobForm(forms.Form):
    template = forms.ChoiceField(label=_("Start from"), required=False, choices=[])
    name = forms.CharField(label=_("Name"), max_length=60,
                           help_text=_("Lower-case letters, digits and hyphens."))
    pool = forms.ChoiceField(label=_("Pool"), choices=[(PoolKind.DEV, PoolKind.DEV.label),
                                                       (PoolKind.PROD, PoolKind.PROD.label)])
    tier = forms.ChoiceField(label=_("Tier"), choices=Tier.choices, initial=Tier.DEVELOPMENT,
                             help_text=_("Production: never preempted (prod pool). "
                                         "Development: preemptible after 5 minutes (dev pool). "
                                         "Batch: idle capacity only, in either pool, up "
                                         "to the pool's batch ceiling; preempted first."))
    kind = forms.ChoiceField(
        label=_("Job kind"), choices=JobKind.choices, initial=JobKind.PYTORCHJOB,
        required=False,
        help_text=_("A PyTorchJob (Kubeflow training operator) or a TrainJob (Kubeflow "
                    "Trainer v2, its nodes = the workers). The same quota, tiers, "
                    "checkpoints and billing."))
    runtime = forms.CharField(
        label=_("Training runtime"), required=False, max_length=253,
        help_text=_("A TrainJob's ClusterTrainingRuntime; empty: torch-distributed."))
    image = forms.CharField(label=_("Container image"), max_length=500,
                            initial="pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime")
    command = forms.CharField(label=_("Command"), required=False, initial="python train.py",
                              max_length=v.MAX_VALUE_CHARS,
                              help_text=_("As you would type it in a shell."))
    args = forms.CharField(label=_("Arguments"), required=False, max_length=v.MAX_VALUE_CHARS)
    env = forms.CharField(label=_("Environment"), required=False, max_length=50_000,
                          widget=forms.Textarea(attrs={"rows": 3}),
                          help_text=_("One NAME=value per line."))
    workers = forms.IntegerField(label=_("Workers"), initial=1, min_value=1,
                                 max_value=v.MAX_WORKERS,
                                 help_text=_("Pods of the gang: all start together or none."))
    gpus_per_worker = forms.IntegerField(label=_("GPUs per worker"), initial=1, min_value=0,
                                         max_value=v.MAX_GPUS_PER_WORKER)
    gpu_model = forms.ChoiceField(label=_("GPU model"), required=False, choices=[])
    mig_profile = forms.ChoiceField(label=_("or MIG slice"), required=False, choices=[])
    gpu_shared = forms.BooleanField(
        label=_("Shared GPUs (time-slicing or MPS)"), required=False,
        help_text=_("The GPUs per worker are then shares of cards other jobs use too, each "
                    "with its slice of the card's memory; only models the cluster shares."))
    gpu_memory_gib_per_card = DecimalField(
        label=_("GPU memory limit per card (GiB)"), required=False, min_value=0,
        max_value=v.MAX_GPU_MEMORY_GIB_PER_CARD, decimal_places=3,
        help_text=_("On HAMi nodes only: each card is limited to this much memory and the rest "
                    "stays for other jobs. Empty: whole cards."))
    # what is typed is the limit; the request (which quota counts) is tenants.demand's
    cpu_per_worker = DecimalField(
        label=_("CPU cores per worker"), initial=8, min_value=0,
        max_value=v.MAX_CPU_PER_WORKER, decimal_places=3,
        help_text=_("The limit of each worker. Its pod requests half of it (all of it below "
                    "one core), and your quota counts the request."))
    memory_gib_per_worker = DecimalField(
        label=_("Memory GiB per worker"), initial=64, min_value=0,
        max_value=v.MAX_MEMORY_GIB_PER_WORKER, decimal_places=3,
        help_text=_("The limit of each worker. Its pod requests 90 percent of it, and your "
                    "quota counts the request."))
    # the service says "between one minute and 30 days" past the browser's max
    max_run_hours = DecimalField(
        label=_("Maximum run time (hours)"), initial=12, min_value=0, decimal_places=2,
        widget=forms.NumberInput(attrs={"max": MAX_RUN_SECONDS // 3600}))
    checkpoint_claim = forms.CharField(label=_("Checkpoint volume (PVC name)"), required=False,
                                       max_length=253,
                                       help_text=_("An existing volume of your team's."))
    checkpoint_storage_class = forms.ChoiceField(
        label=_("or a new checkpoint volume of class"), required=False, choices=[],
        help_text=_("Trainyard creates it with the job and keeps it after the job ends; it "
                    "counts against your storage quota. A job with several workers needs a "
                    "class that mounts on many nodes (ReadWriteMany)."))
    checkpoint_size_gib = forms.IntegerField(label=_("New volume size (GiB)"), required=False,
                                             min_value=1, max_value=v.MAX_CHECKPOINT_GIB,
                                             initial=v.CHECKPOINT_GIB)
    checkpoint_iops = forms.ChoiceField(
        label=_("New volume provisioned IOPS"), required=False, choices=[],
        help_text=_("The class's default, or a tier: your pool's IOPS quota of the class is "
                    "the sum over its volumes, and a volume that would take it over is "
                    "refused."))
    checkpoint_path = forms.CharField(label=_("Checkpoint path"), initial="/checkpoints",
                                      max_length=500)

    def __init__(self, *args: Any, inventory: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        fields: Any = self.fields  # ChoiceFields; django-stubs types them as Field
        fields["template"].choices = [("", _("(blank)"))] + [
            (key, t["label"]) for key, t in TEMPLATES.items()]
        whole = dict(inventory.gpus_per_node) if inventory else {}
        shared = dict(getattr(inventory, "shared_per_node", {}) or {}) if inventory else {}
        fields["gpu_model"].choices = [("", _("(none)"))] + [
            (m, _gpu_model_label(m, whole.get(m), shared.get(m), inventory))
            for m in sorted(set(whole) | set(shared))]
        classes = sorted((inventory.storage_classes if inventory else {}).items())
        fields["checkpoint_storage_class"].choices = [("", _("(none)"))] + [
            (name, _("%(name)s (default)") % {"name": name} if default else name)
            for name, default in classes]
        fields["checkpoint_iops"].choices = [("", _("(the class's default)"))] + [
            (str(tier), _("%(n)s IOPS") % {"n": tier}) for tier in iops_tiers()]
        for dim in extended():  # RDMA NICs ... per worker (core.resources)
            fields[dim.job_field] = forms.IntegerField(
                label=dim.job_label, required=False, min_value=0, initial=0,
                max_value=dim.max_per_worker, help_text=dim.job_help)
        profiles = sorted((inventory.mig_per_node if inventory else {}).items())
        fields["mig_profile"].choices = [("", _("(none)"))] + [
            (p, _("%(what)s (≤%(n)s/node)") % {"what": p, "n": n}) for p, n in profiles]

    def clean_env(self) -> dict[str, str]:
        env = {}
        for line in (self.cleaned_data.get("env") or "").splitlines():
            if not line.strip():
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise forms.ValidationError(_("Write each line as NAME=value."))
            env[key.strip()] = value.strip()
        return env

    def _split(self, name: str) -> list[str]:
        try:
            return shlex.split(self.cleaned_data.get(name) or "")
        except ValueError as exc:
            raise forms.ValidationError(_("Unbalanced quotes: %(e)s") % {"e": exc}) from None

    def clean_command(self) -> list[str]:
        return self._split("command")

    def clean_args(self) -> list[str]:
        return self._split("args")

    def submission(self) -> dict[str, Any]:
        """The service's ``data`` from the cleaned form."""
        data = dict(self.cleaned_data)
        hours = data.pop("max_run_hours")
        data["max_run_seconds"] = int(hours * 3600)
        for key in ("template", "pool"):
            data.pop(key, None)
        data["checkpoint_iops"] = data.get("checkpoint_iops") or None
        return data


def _gpu_model_label(model: str, whole: int | None, shares: int | None, inventory: Any) -> str:
    """A GPU model's menu label: its whole cards per node, and its shares when shared."""
    parts = []
    if whole:
        parts.append(_("≤%(n)s/node") % {"n": whole})
    if shares:
        strategies = inventory.shared_strategies.get(model, ())
        mib = inventory.shared_memory_mib.get(model, 0)
        parts.append(_("shared: ≤%(n)s shares/node, %(memory)s each, %(how)s") % {
            "n": shares, "memory": mib_label(mib),
            "how": ", ".join(sharing_label(s) for s in strategies)})
    if model in getattr(inventory, "hami_memory_mib", {}):
        parts.append(str(_("HAMi memory limits")))
    return "%s (%s)" % (model, "; ".join(parts))  # noqa: UP031 - both parts are translated



def template_initial(key: str, inventory: Any = None,
                     granted: Collection[str] = ()) -> dict[str, Any]:
    """Form initial values for a template (commands joined back for the text inputs).

    A template that asks for GPUs gets a GPU model the cluster has, with nodes big enough
    for one worker, preferring the models in ``granted`` (the tenant's GPU quota), so it
    submits as it stands."""
    template = TEMPLATES.get(key)
    if template is None:
        return {}
    initial = {k: v for k, v in template.items() if k not in ("label", "description")}
    initial["command"] = shlex.join(initial.get("command", []))
    initial["args"] = shlex.join(initial.get("args", []))
    initial["max_run_hours"] = initial.pop("max_run_seconds") / 3600
    initial["pool"] = PoolKind.PROD if initial.get("tier") == Tier.PRODUCTION else PoolKind.DEV
    initial["template"] = key
    if initial.get("gpus_per_worker") and not initial.get("gpu_model") and inventory:
        initial["gpu_model"] = default_gpu_model(inventory, initial["gpus_per_worker"], granted)
    return initial


def default_gpu_model(inventory: Any, gpus_per_worker: int,
                      granted: Collection[str] = ()) -> str:
    """A whole-GPU model whose nodes hold ``gpus_per_worker`` cards: one in ``granted``
    first, then the most cards per node, the name breaking ties; "" when none is."""
    fitting = [(model not in granted, -n, model)
               for model, n in dict(inventory.gpus_per_node).items() if n >= gpus_per_worker]
    return min(fitting)[2] if fitting else ""


def template_values(inventory: Any, granted: Collection[str] = ()) -> dict[str, dict[str, str]]:
    """Every template's field values as the form's inputs show them (the page fills the
    form from these when a template is chosen, keeping what else was typed)."""
    out = {}
    for key in TEMPLATES:
        initial = template_initial(key, inventory, granted)
        out[key] = {name: _as_input(value) for name, value in initial.items()}
    return out


def _as_input(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
