"""Keep the demo alive: submit realistic training jobs now and then, as researchers would.

Used by `make run` (switch off with TRAINYARD_DEMO_LOAD=false). Jobs go through the same
service as the submission form; the admission loop, kubesim and the dashboards do the
rest, so queues, preemptions, resumes and busyness move on their own. Stops on Ctrl-C or
SIGTERM.

The jobs are submitted by the load generator's own account (``seed_demo.LOADGEN``, a
member of every demo tenant), never in a researcher's name. A job is named after its
shape (``multinode-`` only with more than one worker) and records the template it came
from only when it kept that template's shape.
"""

from __future__ import annotations

import random
import signal
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from core.choices import PoolKind, Tier
from core.exceptions import ApplicationError
from jobs import services
from jobs.choices import ACTIVE_STATES, JobState
from jobs.models import TrainingJob
from jobs.selectors import inventory
from jobs.templates import TEMPLATES
from portal.management.commands.seed_demo import LOADGEN
from tenants.access import access_for
from tenants.capacity import capacity_by_resource
from tenants.choices import TenantStatus
from tenants.models import Membership, QuotaGrant
from tenants.selectors import pools_not_in_cluster


def production_cards(tenant: Any, pool: str, model: str) -> int:
    """Whole cards of ``model`` the pool's production jobs hold or wait for."""
    return sum(w * g for w, g in TrainingJob.objects.filter(
        tenant=tenant, pool__kind=pool, tier=Tier.PRODUCTION, gpu_model=model,
        state__in=ACTIVE_STATES).values_list("workers", "gpus_per_worker"))


def shape_name(workers: int, gpus_per_worker: int) -> str:
    """The first word of a demo job's name, from the shape it is submitted with."""
    if workers > 1:
        return "multinode"
    return "ddp" if gpus_per_worker > 1 else "finetune"


def kept_template(key: str, workers: int, gpus_per_worker: int) -> str:
    """``key`` when the job kept its template's shape, else "" (it was resized)."""
    template = TEMPLATES[key]
    return key if (int(template["workers"]), int(template["gpus_per_worker"])) == (
        workers, gpus_per_worker) else ""


class Command(BaseCommand):
    help = "Submit demo training jobs every few seconds until stopped."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--every", type=float, default=4.0,
                            help="mean seconds between submissions")
        parser.add_argument("--max-queued", type=int, default=12,
                            help="submit only while fewer jobs than this wait, so the load keeps "
                                 "the cluster busy without an endless queue")
        parser.add_argument("--seed", type=int, default=None)
        parser.add_argument("--count", type=int, default=0, help="stop after N (0: never)")
        parser.add_argument("--burst", type=int, default=6,
                            help="jobs submitted at once when nothing is queued or running, so a "
                                 "new demo has queues to show within seconds")
        parser.add_argument("--pool-wait", type=float, default=0.0,
                            help="first wait up to this many seconds for every pool to be in "
                                 "the cluster (as the watcher records it), so a fresh demo's "
                                 "first jobs are not queued behind their namespaces")

    def handle(self, *args: Any, **options: Any) -> None:
        rng = random.Random(options["seed"])
        stop = False

        def on_signal(signum: int, _frame: object) -> None:
            nonlocal stop
            stop = True
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        submitted = 0
        if not Membership.objects.filter(user__username=LOADGEN).exists():
            self.stderr.write(f"demo load: the {LOADGEN} account belongs to no tenant "
                              "(manage.py seed_demo makes it a member of the demo's): "
                              "nothing to submit as")
            return
        # Jobs of a pool not yet in the cluster would only wait for it (admission holds
        # them); on a fresh start, let the pools be set up and observed first.
        until = time.monotonic() + options["pool_wait"]
        while not stop and time.monotonic() < until and pools_not_in_cluster():
            time.sleep(0.5)
        # A first burst when nothing is queued or running, so a new demo shows queues at
        # once; a failed try (the cluster's nodes not observed yet) is retried a second later.
        burst = 0 if TrainingJob.objects.filter(state__in=ACTIVE_STATES).exists() \
            else options["burst"]
        tries = 3 * burst
        while not stop and (not options["count"] or submitted < options["count"]):
            full = options["max_queued"] and not burst and TrainingJob.objects.filter(
                state=JobState.QUEUED).count() >= options["max_queued"]
            ok = False if full else self._submit_one(rng)
            submitted += int(ok)
            if burst and tries:
                tries -= 1
                burst -= int(ok)
                pause = 0.0 if ok else 1.0
            else:
                pause = rng.expovariate(1 / options["every"])
            deadline = time.monotonic() + pause
            while not stop and time.monotonic() < deadline:
                time.sleep(0.2)
        self.stdout.write(f"demo load: {submitted} jobs submitted")

    def _submit_one(self, rng: random.Random) -> bool:
        """One job, by the load generator, in a random tenant it belongs to. Production
        stays within what its pool's grant has left (production never borrows: a
        researcher who sees the gauge full sends batch work instead); development and
        batch jobs are sized as the template says and may ask for more than the grant, or
        for a model the pool was not granted, so they visibly borrow idle capacity and
        are reclaimed when the owners' work arrives."""
        members = list(Membership.objects.select_related("user", "tenant").filter(
            tenant__status=TenantStatus.ACTIVE, user__username=LOADGEN).order_by("tenant_id"))
        if not members:
            return False
        membership = rng.choice(members)
        pool = rng.choice([PoolKind.DEV, PoolKind.DEV, PoolKind.PROD])
        grants = {g.resource[4:]: int(g.amount) for g in QuotaGrant.objects.filter(
            pool__tenant=membership.tenant, pool__kind=pool, superseded_at__isnull=True,
            resource__startswith="gpu:")}
        models = inventory().gpus_per_node
        granted = [m for m in grants if m in models]
        if not models:
            return False
        key = rng.choice(list(TEMPLATES))
        template = TEMPLATES[key]
        tier = Tier.PRODUCTION if pool == PoolKind.PROD and rng.random() < 0.7 else (
            Tier.BATCH if rng.random() < 0.25
            else (Tier.DEVELOPMENT if pool == PoolKind.DEV else Tier.BATCH))
        if tier == Tier.PRODUCTION and not granted:
            tier = Tier.BATCH
        # mostly a model the pool was granted; sometimes any model (borrowed idle capacity)
        model = rng.choice(granted) if granted and (tier == Tier.PRODUCTION or rng.random() < 0.8) \
            else rng.choice(sorted(models))
        per_node = models[model]
        gpus = min(int(template["gpus_per_worker"]), per_node)
        workers = int(template["workers"]) if gpus == per_node else 1
        # at most half the model's cards, so a gang fits the cluster beside other work
        cards = int(capacity_by_resource().get(f"gpu:{model}", 0))
        workers = max(1, min(workers, cards // max(1, 2 * gpus)))
        if tier == Tier.PRODUCTION:   # within what the pool's grant has left
            left = grants.get(model, 0) - production_cards(membership.tenant, pool, model)
            if left < gpus:
                tier = Tier.BATCH
            else:
                workers = max(1, min(workers, left // max(1, gpus)))
        run_seconds = int(rng.lognormvariate(8.2, 0.8))  # median ~1 h of simulated time
        # kubesim runs it KUBESIM_SPEED times faster on the wall clock it stamps (its
        # speed shortens run times, never the clock): the owner expects what will happen
        expected = max(1, round(run_seconds / (float(settings.KUBESIM_SPEED) or 1.0)))
        data = {
            "name": f"{shape_name(workers, gpus)}-{rng.randrange(16**6):06x}",
            "image": "registry.example.org/research/trainer:2.4", "tier": tier,
            "workers": workers, "gpus_per_worker": gpus, "gpu_model": model,
            "cpu_per_worker": 8, "memory_gib_per_worker": 32, "max_run_seconds": 6 * 3600,
            "command": list(template["command"]), "args": list(template["args"]),
            "expected_seconds": expected,
            "annotations": {"kubesim.trainyard.io/run-seconds": str(run_seconds),
                            "kubesim.trainyard.io/gpu-util": str(rng.randint(35, 98))},
        }
        access = access_for(membership.user, membership.tenant)
        if access is None:
            return False
        try:
            services.job_submit(access=access, actor=membership.user, pool=pool, data=data,
                                template=kept_template(key, workers, gpus))
        except ApplicationError as exc:
            self.stderr.write(f"demo load: {exc.message}")
            return False
        return True
