"""``make chaos``: the production-like stack under load while things break, then invariants.

Starts, on this machine and on its own database, Redis and ports (never the shared ones):
Postgres database ``--db`` (dropped and created), its own ``redis-server`` on
``--redis-port`` (``--save ""``: a restart loses the broker's queue and the cache, as a
crashed Redis without persistence would), kubesim, gunicorn, the Celery worker and beat
and the watcher (``manage.py k8s_watch``). It starts and kills these processes itself
(not through ``portal.launcher``).

For ``--minutes`` it keeps a realistic load going through the REST API with tokens:
researchers submit jobs (and cancel some), tenant admins ask for more quota and the
platform admin approves, finance reads the month and the ledger and drafts are refreshed.
Meanwhile it

* kills -9 the worker or the watcher at random moments (``--kills`` in the run) and
  restarts them after a few seconds;
* restarts its Redis (``--redis-restarts``), losing what it held;
* makes kubesim answer 500, 429, 409 and hang (timeouts) to about ``--faults`` of the
  platform's requests (``POST /kubesim/faults`` rules with a ``times`` count, so every
  injected fault is counted) and drops every open watch connection now and then
  (``POST /kubesim/watches/drop``).

Then it stops breaking things, lets the system settle (``--settle`` seconds at most) and
checks, from the database and the live cluster:

1. progress: every job is terminal, or queued in a pool the cluster shows, or admitted
   recently, or running with its PyTorchJob in the cluster; nothing runs in the cluster
   for a job the database does not hold admitted or running;
2. history: every transition starts where the previous one ended; a job is admitted only
   from the queue, never twice without leaving in between; a job that succeeded has a
   recorded run;
3. ceilings: replaying every transition, no pool ever held more than its ceiling;
4. pools: every pool converged in the cluster (``tenants.tasks.pool_drift``);
5. ledger: the GPU-seconds the worker ingested equal the jobs' running intervals;
6. notifications: every notifying transition has exactly one notification.

Prints what it injected and what held; exits 0 when every invariant held and the
injection targets were reached.

    .venv/bin/python scripts/chaos.py --minutes 10
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import heapq
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
PY = sys.executable

HOLDING = ("admitted", "running", "preempting")
TERMINAL = ("succeeded", "failed", "cancelled")
#: transitions whose reason tells the job's owner (``jobs.tasks``): one notification each
#: (a problem with the job's pods is told besides, once: ``db_notifications``)
NOTIFYING_REASONS = ("NotStarted", "Unbuildable")


# --- the invariants: pure functions over plain data (the smoke test feeds them) -----------

@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Step:
    """One JobTransition: (at, id) orders them."""
    job: int
    at: dt.datetime
    id: int
    from_state: str
    to_state: str
    reason: str = ""


def check_history(steps: Iterable[Step]) -> Check:
    """Each job's transitions chain (from = previous to); admitted only from queued, so
    never twice without leaving the holding states in between; a job that succeeded ran
    (its running stretch is what the ledger bills)."""
    by_job: dict[int, list[Step]] = defaultdict(list)
    for s in steps:
        by_job[s.job].append(s)
    problems, admissions = [], 0
    for job, chain in sorted(by_job.items()):
        chain.sort(key=lambda s: (s.at, s.id))
        previous, ran = "", False
        for s in chain:
            ran = ran or s.to_state == "running"
            if s.to_state == "succeeded" and not ran:
                problems.append(f"job {job}: succeeded without a recorded run "
                                f"(nothing billed; transition {s.id})")
            if s.from_state != previous:
                problems.append(f"job {job}: transition {s.id} from {s.from_state or '-'} "
                                f"but it was {previous or '-'}")
            if s.to_state == "admitted":
                admissions += 1
                if s.from_state != "queued":
                    problems.append(f"job {job}: admitted from {s.from_state or '-'} "
                                    f"(transition {s.id})")
            if previous in TERMINAL:
                problems.append(f"job {job}: moved on after {previous} (transition {s.id})")
            previous = s.to_state
    return Check("no job admitted twice; every transition chains", not problems,
                 f"{len(by_job)} jobs, {admissions} admissions", problems)


def check_ceilings(steps: Iterable[Step], demand: Mapping[int, tuple[Any, dict[str, int]]],
                   limits: Mapping[Any, Mapping[str, int]]) -> Check:
    """Replays the transitions: at every instant the jobs holding resources (admitted,
    running, preempting) of a pool need at most the pool's ceiling of every key.
    ``demand``: job -> (pool, {key: units}); ``limits``: pool -> {key: ceiling}."""
    ordered = sorted(steps, key=lambda s: (s.at, s.id))
    use: dict[tuple[Any, str], int] = defaultdict(int)
    holding: set[int] = set()
    peak: dict[tuple[Any, str], int] = defaultdict(int)
    problems: list[str] = []
    i = 0
    while i < len(ordered):
        at = ordered[i].at
        while i < len(ordered) and ordered[i].at == at:   # one instant at a time
            s = ordered[i]
            i += 1
            if s.job not in demand:
                continue
            pool, units = demand[s.job]
            now_holds = s.to_state in HOLDING
            if now_holds and s.job not in holding:
                holding.add(s.job)
                for key, n in units.items():
                    use[(pool, key)] += n
            elif not now_holds and s.job in holding:
                holding.discard(s.job)
                for key, n in units.items():
                    use[(pool, key)] -= n
        for (pool, key), n in use.items():
            peak[(pool, key)] = max(peak[(pool, key)], n)
            ceiling = limits.get(pool, {}).get(key)
            if ceiling is not None and n > ceiling:
                problems.append(f"{pool} held {n} {key} > ceiling {ceiling} at {at:%H:%M:%S}")
    busiest = sorted(((n / max(1, limits[p][k]), p, k, n) for (p, k), n in peak.items()
                      if limits.get(p, {}).get(k)), key=lambda t: t[0], reverse=True)[:3]
    detail = "; ".join(f"{p} peak {n} {k} of {limits.get(p, {}).get(k)}"
                       for _r, p, k, n in busiest)
    return Check("no pool's admitted demand ever above its ceiling", not problems,
                 detail, problems[:20] + ([f"... {len(problems) - 20} more"]
                                          if len(problems) > 20 else []))


def running_seconds_by_job(steps: Iterable[Step], now: dt.datetime) -> dict[int, tuple[int, bool]]:
    """job -> (whole seconds in state running up to ``now``, still running at ``now``)."""
    by_job: dict[int, list[Step]] = defaultdict(list)
    for s in steps:
        by_job[s.job].append(s)
    out = {}
    for job, chain in by_job.items():
        chain.sort(key=lambda s: (s.at, s.id))
        total, start = 0.0, None
        for s in chain:
            if s.at > now:
                break
            if s.to_state == "running" and start is None:
                start = s.at
            elif s.to_state != "running" and start is not None:
                total += (s.at - start).total_seconds()
                start = None
        if start is not None:
            total += (now - start).total_seconds()
        out[job] = (int(total), start is not None)
    return out


def check_ledger(steps: Iterable[Step], ledger: Mapping[int, int], ingested_at: dt.datetime | None,
                 *, tolerance: int = 2) -> Check:
    """The worker's ledger (``ledger``: job -> seconds in GpuUsage, as of its last ingest
    at ``ingested_at``) equals the running intervals: exactly (up to a second per day
    boundary, ``tolerance``) for jobs not running then, at most for jobs still running."""
    if ingested_at is None:
        return Check("the ledger equals the running intervals", False,
                     "", ["no ledger ingest ran after the chaos"])
    expected = running_seconds_by_job(steps, ingested_at)
    problems = []
    for job in sorted(set(expected) | set(ledger)):
        want, open_ = expected.get(job, (0, False))
        got = ledger.get(job, 0)
        if open_ and got > want + tolerance:
            problems.append(f"job {job}: ledger {got}s > {want}s running so far")
        elif not open_ and abs(got - want) > tolerance:
            problems.append(f"job {job}: ledger {got}s != {want}s running")
    total = sum(ledger.values())
    return Check("the ledger equals the running intervals", not problems,
                 f"{len([j for j in ledger if ledger[j]])} jobs, {total} GPU-job-seconds",
                 problems[:20])


def check_notifications(steps: Iterable[Step], sent: Mapping[int, int],
                        duplicates: Iterable[str] = ()) -> Check:
    """Every notifying transition (:data:`NOTIFYING_REASONS`) of a job has exactly one
    notification to its owner (``sent``: job -> notifications linked to it);
    ``duplicates``: other notifications found twice."""
    due: Counter[int] = Counter(s.job for s in steps if s.reason in NOTIFYING_REASONS)
    problems = [f"job {job}: {sent.get(job, 0)} notifications for {due.get(job, 0)} events"
                for job in sorted(set(due) | set(sent)) if sent.get(job, 0) != due.get(job, 0)]
    problems += [f"sent twice: {d}" for d in duplicates]
    return Check("every notification sent once", not problems,
                 f"{sum(due.values())} job notifications due, {sum(sent.values())} sent",
                 problems[:20])


@dataclass(frozen=True)
class JobNow:
    id: int
    state: str
    pool_in_cluster: bool
    in_cluster: bool
    admitted_at: dt.datetime | None
    preempt_deadline: dt.datetime | None
    waiting_reason: bool  # the admission loop recorded why it waits


def check_progress(jobs: Iterable[JobNow], cluster_running: Mapping[int, bool], *,
                   now: dt.datetime, grace: dt.timedelta) -> Check:
    """Every job is terminal or where it should be: queued (its pool in the cluster, the
    loop saw it), admitted for less than ``grace`` or created in the cluster, running
    with its PyTorchJob unsuspended, preempting within its grace. ``cluster_running``:
    job -> its PyTorchJob exists unsuspended and unfinished (False: exists, suspended)."""
    problems, states = [], Counter()
    db_holding = set()
    for j in jobs:
        states[j.state] += 1
        if j.state in HOLDING:
            db_holding.add(j.id)
        if j.state == "queued":
            if not j.pool_in_cluster:
                problems.append(f"job {j.id}: queued, its pool is not in the cluster")
            elif not j.waiting_reason:
                problems.append(f"job {j.id}: queued and never considered by the loop")
        elif j.state == "admitted":
            if j.admitted_at is None or (now - j.admitted_at > grace and not j.in_cluster):
                problems.append(f"job {j.id}: admitted without progress since {j.admitted_at}")
        elif j.state == "running":
            if not cluster_running.get(j.id):
                problems.append(f"job {j.id}: running but its PyTorchJob is not running")
        elif j.state == "preempting" and (j.preempt_deadline is None
                                          or now - j.preempt_deadline > grace):
            problems.append(f"job {j.id}: preempting past its grace ({j.preempt_deadline})")
    for job, running in sorted(cluster_running.items()):
        if running and job not in db_holding:
            problems.append(f"job {job}: runs in the cluster but is not admitted")
    detail = ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
    return Check("every job terminal or correctly queued/running", not problems, detail,
                 problems[:20])


def check_pools(drifted: Iterable[str], total: int) -> Check:
    drifted = list(drifted)
    return Check("every pool converged in the cluster", not drifted,
                 f"{total - len(drifted)} of {total} pools", [f"{p} drifted" for p in drifted])


# --- reading the facts (Django) ------------------------------------------------------------

def db_steps() -> list[Step]:
    from jobs.models import JobTransition

    return [Step(*row) for row in JobTransition.objects.values_list(
        "job_id", "at", "id", "from_state", "to_state", "reason")]


def db_demand_and_limits(now: dt.datetime) -> tuple[dict, dict]:
    """job -> (pool, engine units) and pool -> ceilings (``PoolQuota.limits``: the larger of
    the development and the batch ceiling, with the grants as they are now: approvals only
    raised them)."""
    from jobs.models import TrainingJob
    from jobs.selectors import admission_inputs, job_resources, observed_card_facts

    facts = observed_card_facts()
    demand = {j.pk: (f"{j.tenant.slug}/{j.pool.kind}", job_resources(j, facts))
              for j in TrainingJob.objects.select_related("tenant", "pool")}
    limits: dict[str, dict[str, int]] = {}
    for q in admission_inputs(now)["quotas"]:   # a key not listed: the pool's default
        keys = set(q.nominal) | set(q.ceiling) | set(q.batch_ceiling or {})
        limits[f"{q.tenant}/{q.pool}"] = {   # what the pool's jobs together may hold
            k: max(q.limits(k, tier)[1] for tier in ("development", "batch")) for k in keys}
    return demand, limits


def db_ledger() -> tuple[dict[int, int], dt.datetime | None]:
    from django.db.models import Max, Sum

    from billing.models import GpuUsage

    rows = GpuUsage.objects.values("job_id").annotate(s=Sum("seconds"))
    last = GpuUsage.objects.aggregate(m=Max("updated_at"))["m"]
    return {r["job_id"]: int(r["s"]) for r in rows}, last


def db_notifications() -> tuple[dict[int, int], list[str]]:
    from django.db.models import Count

    from tenants.models import Notification

    sent: Counter[int] = Counter()
    dupes = []
    # What stops a job's pods is told once per problem (jobs.problems), beside the
    # transitions' notifications: counted apart, by job and problem.
    told: Counter[tuple[int, str]] = Counter()
    rows = Notification.objects.values("user_id", "link", "message").annotate(n=Count("id"))
    problems = {(r["link"], r["message"]): code for r in Notification.objects.filter(
        link__contains="/jobs/").values("link", "message", "text")
        if (code := problem_of(r["text"]))}
    for r in rows:
        link = r["link"] or ""
        parts = [p for p in link.split("/") if p]
        job = (int(parts[3]) if len(parts) >= 4 and parts[0] == "t" and parts[2] == "jobs"
               and parts[3].isdigit() else None)
        if job is not None and (link, r["message"]) in problems:
            told[(job, problems[(link, r["message"])])] += r["n"]
        elif job is not None:
            sent[job] += r["n"]
        elif r["n"] > 1:
            dupes.append(f"user {r['user_id']}: {r['message'][:80]} x{r['n']}")
    dupes += [f"job {job}: told twice of {code}" for (job, code), n in told.items() if n > 1]
    return dict(sent), dupes


def problem_of(text: Any) -> str:
    """The problem a job's notification tells of (``jobs.problems``), or ""."""
    inner = ((text or {}).get("args") or {}).get("text") if isinstance(text, dict) else None
    if not isinstance(inner, dict) or inner.get("code") != "jobs.problem.notify":
        return ""
    return str(((inner.get("args") or {}).get("cause") or {}).get("code") or "")


def db_jobs_now() -> list[JobNow]:
    from jobs.models import TrainingJob
    from tenants.selectors import pools_not_in_cluster

    absent = {p.pk for p in pools_not_in_cluster()}
    return [JobNow(j.pk, j.state, j.pool_id not in absent, j.in_cluster, j.admitted_at,
                   j.preempt_deadline, bool(j.wait_reason) or j.state != "queued")
            for j in TrainingJob.objects.all()]


def cluster_jobs(client: Any) -> dict[int, bool]:
    """job id -> its PyTorchJob runs (exists, not suspended, not finished)."""
    from k8s_sync import naming

    out = {}
    for obj in client.list_objects("kubeflow.org/v1", "PyTorchJob"):
        labels = obj["metadata"].get("labels") or {}
        raw = labels.get(naming.LABEL_JOB, "")
        if not raw.isdigit():
            continue
        conditions = {c.get("type"): c.get("status") for c in
                      (obj.get("status") or {}).get("conditions") or []}
        finished = conditions.get("Succeeded") == "True" or conditions.get("Failed") == "True"
        suspended = bool((obj.get("spec") or {}).get("runPolicy", {}).get("suspend"))
        out[int(raw)] = not suspended and not finished
    return out


def check_all(*, now: dt.datetime, client: Any = None,
              grace: dt.timedelta = dt.timedelta(seconds=120)) -> list[Check]:
    """Every invariant, from the database (and the live cluster when ``client``)."""
    steps = db_steps()
    demand, limits = db_demand_and_limits(now)
    ledger, ingested = db_ledger()
    sent, dupes = db_notifications()
    checks = [check_history(steps), check_ceilings(steps, demand, limits),
              check_ledger(steps, ledger, ingested), check_notifications(steps, sent, dupes)]
    if client is not None:
        from tenants.models import Pool
        from tenants.tasks import pool_drift

        drifted, _ok = pool_drift(client)
        names = {p.pk: str(p) for p in Pool.objects.select_related("tenant")}
        checks.append(check_pools([names.get(p, str(p)) for p in drifted], len(names)))
        checks.append(check_progress(db_jobs_now(), cluster_jobs(client), now=now, grace=grace))
    return checks


# --- the stack -------------------------------------------------------------------------------

def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_port(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_open(port):
            return True
        time.sleep(0.2)
    return False


class Proc:
    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path):
        self.name, self.argv, self.env, self.log = name, argv, env, log
        self.popen: subprocess.Popen | None = None
        self.starts = 0
        self.unexpected_exits = 0

    def start(self) -> None:
        out = self.log.open("ab")
        self.popen = subprocess.Popen(self.argv, env=self.env, cwd=ROOT, stdout=out,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        self.starts += 1

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive():
            assert self.popen is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()


class Api:
    """The REST API with a user's token; counts statuses."""

    def __init__(self, base: str, tokens: Mapping[str, str]):
        import requests

        self.base, self.tokens = base, dict(tokens)
        self.session = requests.Session()
        self.statuses: Counter[str] = Counter()
        self.errors: list[str] = []

    def call(self, user: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        import requests

        try:
            r = self.session.request(method, self.base + path, json=body, timeout=20,
                                     headers={"Authorization": f"Token {self.tokens[user]}"})
        except requests.RequestException as exc:
            self.statuses["no answer"] += 1
            self.errors.append(f"{method} {path}: {type(exc).__name__}")
            return 0, None
        self.statuses[f"{r.status_code // 100}xx"] += 1
        if r.status_code >= 500:
            self.errors.append(f"{method} {path}: {r.status_code} {r.text[:200]}")
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, None


class Kubesim:
    """kubesim's fault rules and counters (``/kubesim/faults``, ``/kubesim/watches/drop``)."""

    #: a rule nothing matched for this long is withdrawn (a rare method must not clog
    #: the backlog)
    RULE_LIFE = 20.0

    def __init__(self, port: int):
        import requests

        self.url, self.session = f"http://127.0.0.1:{port}", requests.Session()
        self.added: dict[int, float] = {}   # rule id -> when
        self.by_status: Counter[str] = Counter()
        self.faulted = self.requests = 0
        self.drops = 0
        self.dropped_connections = 0

    def add(self, label: str, **rule: Any) -> None:
        r = self.session.post(self.url + "/kubesim/faults", json=rule, timeout=5)
        r.raise_for_status()
        self.added[r.json()["id"]] = time.monotonic()
        self.by_status[label] += rule["times"]

    def outstanding(self) -> int:
        """Hits still to come (withdrawing stale rules); updates the counters."""
        listed = self.session.get(self.url + "/kubesim/faults", timeout=5).json()
        self.faulted, self.requests = listed["faulted"], listed["requests"]
        left = 0
        for rule in listed["rules"]:
            if time.monotonic() - self.added.get(rule["id"], 0) > self.RULE_LIFE:
                self.session.delete(self.url + "/kubesim/faults",
                                    params={"id": rule["id"]}, timeout=5)
            else:
                left += rule["times"] or 0
        return left

    def clear(self) -> None:
        self.outstanding()
        self.session.delete(self.url + "/kubesim/faults", timeout=5)

    def drop_watches(self) -> None:
        r = self.session.post(self.url + "/kubesim/watches/drop", timeout=5)
        self.drops += 1
        self.dropped_connections += r.json().get("dropped", 0)


FAULTS = [  # (label, weight, rule): statuses the API server answers under pressure
    ("500", 40, {"status": 500}),
    ("429", 30, {"status": 429, "retry_after": 1}),
    ("409", 20, {"status": 409, "method": "PATCH"}),
    ("409", 5, {"status": 409, "method": "POST"}),
    ("timeout", 5, {"timeout": True, "path_regex": r"^(?!.*watch)"}),
]


def reset_database(name: str) -> None:
    for sql in (f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"'):
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-q", "-c", sql],
                       check=True, stdout=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--db", default="trainyard_chaos")
    p.add_argument("--redis-port", type=int, default=6390)
    p.add_argument("--redis-db", type=int, default=13)
    p.add_argument("--web-port", type=int, default=8390)
    p.add_argument("--sim-port", type=int, default=6490)
    p.add_argument("--kills", type=int, default=24, help="worker/watcher kills in the run")
    p.add_argument("--redis-restarts", type=int, default=2)
    p.add_argument("--faults", type=int, default=1200, help="API faults to inject in the run")
    p.add_argument("--submit-every", type=float, default=1.0, help="mean seconds between jobs")
    p.add_argument("--settle", type=float, default=300.0)
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(10**6)
    rng = random.Random(seed)
    var = Path(tempfile.mkdtemp(prefix="trainyard-chaos-"))
    (var / "kubesim").mkdir()
    print(f"chaos: seed {seed}, {args.minutes} min, logs in {var}", flush=True)

    redis_url = f"redis://127.0.0.1:{args.redis_port}/{args.redis_db}"
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="portal.settings", DEBUG="false", PYTHONUNBUFFERED="1",
        SECRET_KEY="chaos-" + "x" * 50, ALLOWED_HOSTS="127.0.0.1,localhost",
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{args.db}",
        REDIS_URL=redis_url, CELERY_BROKER_URL=redis_url, TRAINYARD_VAR_DIR=str(var),
        TRAINYARD_CLUSTER_MODE="embedded", KUBECONFIG=str(var / "kubesim" / "kubeconfig"),
        TRAINYARD_CLUSTER_TIMEOUT="3", SECURE_SSL_REDIRECT="false", STATIC_MANIFEST="false",
        EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend")
    env.pop("DJANGO_DEBUG", None)
    for port in (args.redis_port, args.web_port, args.sim_port):
        if port_open(port):
            print(f"port {port} is in use; choose another", file=sys.stderr)
            return 2

    manage = [PY, str(ROOT / "manage.py")]
    redis = Proc("redis", ["redis-server", "--port", str(args.redis_port), "--bind",
                           "127.0.0.1", "--save", "", "--appendonly", "no"], env,
                 var / "redis.log")
    sim = Proc("kubesim", [PY, "-m", "kubesim", "--host", "127.0.0.1", "--port",
                           str(args.sim_port), "--profile", "default", "--speed", "60",
                           "--kubeconfig", str(var / "kubesim" / "kubeconfig")], env,
               var / "kubesim.log")
    web = Proc("web", [PY, "-m", "gunicorn", "portal.wsgi", "-b",
                       f"127.0.0.1:{args.web_port}", "-w", "2", "--timeout", "60"], env,
               var / "web.log")
    worker = Proc("worker", [PY, "-m", "celery", "-A", "portal", "worker", "-P", "solo",
                             "-Q", "default,k8s,billing", "--loglevel", "WARNING"], env,
                  var / "worker.log")
    beat = Proc("beat", [PY, "-m", "celery", "-A", "portal", "beat", "--loglevel",
                         "WARNING", "-s", str(var / "celerybeat-schedule")], env,
                var / "beat.log")
    watch = Proc("watcher", [*manage, "k8s_watch"], env, var / "watch.log")
    procs = [redis, sim, web, worker, beat, watch]
    killable = {"worker": worker, "watcher": watch}
    kills: Counter[str] = Counter()
    redis_restarts = 0
    down: dict[str, float] = {}   # process -> when to restart it

    def stop_everything() -> None:
        for proc in reversed(procs):
            proc.kill(signal.SIGTERM)

    try:
        reset_database(args.db)
        redis.start()
        sim.start()
        if not (wait_port(args.redis_port, 20) and wait_port(args.sim_port, 30)):
            print("redis or kubesim did not start", file=sys.stderr)
            return 1
        subprocess.run([*manage, "demo_setup"], env=env, cwd=ROOT, check=True,
                       stdout=(var / "setup.log").open("wb"), stderr=subprocess.STDOUT)
        os.environ.update(env)
        import django

        django.setup()
        from django.utils import timezone
        from rest_framework.authtoken.models import Token

        from core.models import Policy
        from k8s_sync.client import get_client
        from portal.celery import app as celery_app
        from tenants.models import Membership, QuotaGrant
        from tenants.selectors import pools_not_in_cluster

        # a short pod-start deadline, so the deadline's requeues and notifications happen
        Policy.objects.filter(pk=Policy.current().pk).update(pod_start_deadline_seconds=90)
        users = ["platform", "finance", "alice", "bob", "carol", "dave"]
        from django.contrib.auth import get_user_model

        tokens = {u: Token.objects.get_or_create(user=get_user_model().objects.get(
            username=u))[0].key for u in users}
        members = [(m.user.username, m.tenant.slug, m.role) for m in
                   Membership.objects.select_related("user", "tenant")]
        web.start()
        watch.start()
        worker.start()
        beat.start()
        if not wait_port(args.web_port, 60):
            print("gunicorn did not start", file=sys.stderr)
            return 1
        api = Api(f"http://127.0.0.1:{args.web_port}/api/v1", tokens)
        kube = Kubesim(args.sim_port)
        started = time.monotonic()
        while pools_not_in_cluster() and time.monotonic() - started < 120:
            time.sleep(1)
        print(f"chaos: stack up in {time.monotonic() - started:.0f} s "
              f"({len(pools_not_in_cluster())} pools not in the cluster yet)", flush=True)

        # finance closes last month (ended, empty): the month close under load
        last_month = (timezone.localdate().replace(day=1) - dt.timedelta(days=1))
        api.call("finance", "POST", f"/billing/months/{last_month:%Y-%m}/close/")

        duration = args.minutes * 60
        t0 = time.monotonic()
        end = t0 + duration
        events: list[tuple[float, int, str]] = []
        seq = iter(range(10**9))

        def at(offset: float, what: str) -> None:
            heapq.heappush(events, (t0 + offset, next(seq), what))

        for i in range(args.kills):   # spread over the run, jittered
            at(duration * (i + 0.5 + rng.uniform(-0.4, 0.4)) / (args.kills + 1), "kill")
        for i in range(args.redis_restarts):
            at(duration * (i + 1) / (args.redis_restarts + 1) + rng.uniform(-10, 10), "redis")
        at(1, "submit")
        at(5, "faults")
        at(15, "drop")
        at(20, "approve")
        at(10, "month")
        at(30, "cancel")
        submitted: list[tuple[str, str, int]] = []   # (user, tenant, job id)
        approvals: Counter[str] = Counter()
        names = iter(range(10**9))
        faults_per_second = args.faults / duration

        def grants() -> list[tuple[str, str, str, int]]:
            return [(g.pool.tenant.slug, g.pool.kind, g.resource[4:], int(g.amount))
                    for g in QuotaGrant.objects.select_related("pool__tenant").filter(
                        superseded_at__isnull=True, resource__startswith="gpu:")]

        gpu_grants = grants()
        while True:
            now = time.monotonic()
            for name, when in list(down.items()):
                if now >= when:
                    killable[name].start()
                    del down[name]
            for proc in procs:   # a process that died by itself: counted and restarted
                if proc.name not in down and proc.popen is not None and not proc.alive():
                    if proc is redis and "redis" in down:
                        continue
                    proc.unexpected_exits += 1
                    print(f"chaos: {proc.name} exited by itself "
                          f"({proc.popen.returncode}); restarting", flush=True)
                    proc.start()
            if now >= end or not events:
                break
            when, _, what = heapq.heappop(events)
            if when > now:
                time.sleep(min(when - now, 1.0))
                heapq.heappush(events, (when, next(seq), what))
                continue
            try:
                if what == "kill":
                    name = rng.choice([n for n in killable if n not in down] or ["worker"])
                    killable[name].kill(signal.SIGKILL)
                    kills[name] += 1
                    down[name] = time.monotonic() + rng.uniform(0.5, 6)
                elif what == "redis":
                    redis.kill(signal.SIGKILL)
                    time.sleep(rng.uniform(1, 4))
                    redis.start()
                    redis_restarts += 1
                    wait_port(args.redis_port, 10)
                elif what == "submit":
                    at(now - t0 + rng.expovariate(1 / args.submit_every), "submit")
                    user, slug, _role = rng.choice(members)
                    options = [g for g in gpu_grants if g[0] == slug]
                    if options:
                        _s, pool, model, amount = rng.choice(options)
                        gpus = rng.choice([1, 1, 2, 4])
                        workers = rng.choice([1, 1, 2]) if gpus * 2 <= amount else 1
                        tier = ("production" if pool == "prod" and rng.random() < 0.6 else
                                "batch" if rng.random() < 0.3 else
                                "development" if pool == "dev" else "batch")
                        run = int(rng.lognormvariate(6.5, 0.7))   # ~11 simulated minutes
                        status, body = api.call(user, "POST", f"/tenants/{slug}/jobs/", {
                            "name": f"chaos-{next(names)}", "pool": pool, "tier": tier,
                            "image": "registry.example.org/research/trainer:2.4",
                            "workers": workers, "gpus_per_worker": gpus, "gpu_model": model,
                            "cpu_per_worker": 4, "memory_gib_per_worker": 16,
                            "max_run_seconds": 6 * 3600, "expected_seconds": run,
                            "annotations": {"kubesim.trainyard.io/run-seconds": str(run)}})
                        if status == 201 and body:
                            submitted.append((user, slug, int(body["id"])))
                elif what == "cancel":
                    at(now - t0 + rng.uniform(5, 20), "cancel")
                    if submitted:
                        user, slug, job = rng.choice(submitted)
                        api.call(user, "POST", f"/tenants/{slug}/jobs/{job}/cancel/")
                elif what == "approve":
                    at(now - t0 + rng.uniform(20, 40), "approve")
                    admins = [(u, s) for u, s, r in members if r == "admin"]
                    user, slug = rng.choice(admins)
                    options = [g for g in gpu_grants if g[0] == slug]
                    if options:
                        _s, pool, model, amount = rng.choice(options)
                        status, body = api.call(user, "POST", f"/tenants/{slug}/quota-requests/",
                                                {"pool": pool, "justification": "chaos load",
                                                 "amounts": {f"gpu:{model}": str(amount + 1)}})
                        approvals[f"asked {status}"] += 1
                        if status == 201 and body:
                            status, _ = api.call("platform", "POST",
                                                 f"/quota-requests/{body['id']}/approve/",
                                                 {"note": "chaos"})
                            approvals[f"approved {status}"] += 1
                            gpu_grants = grants()
                elif what == "month":
                    at(now - t0 + rng.uniform(15, 30), "month")
                    api.call("finance", "GET", f"/billing/months/{timezone.localdate():%Y-%m}/")
                    for task, queue in (("billing.ingest_ledger", "billing"),
                                        ("billing.refresh_drafts", "billing")):
                        try:
                            celery_app.send_task(task, queue=queue)
                        except Exception as exc:
                            api.errors.append(f"send {task}: {type(exc).__name__}")
                elif what == "faults":
                    at(now - t0 + 1, "faults")
                    left = kube.outstanding()
                    due = faults_per_second * (now - t0) - kube.faulted - left
                    if left < 8 and due > 0:
                        for _ in range(min(10, int(due) + 1)):
                            label, _w, rule = rng.choices(FAULTS, [f[1] for f in FAULTS])[0]
                            times = 1 if label == "timeout" else rng.randint(1, 3)
                            kube.add(label, **{"path_regex": ".*", "times": times, **rule})
                elif what == "drop":
                    at(now - t0 + rng.uniform(15, 40), "drop")
                    kube.drop_watches()
            except Exception as exc:
                print(f"chaos: {what} failed: {type(exc).__name__}: {exc}", flush=True)
            if int(now - t0) % 60 == 0 and what == "faults":
                print(f"chaos: {now - t0:4.0f} s: {len(submitted)} jobs submitted, "
                      f"{sum(kills.values())} kills, {redis_restarts} Redis restarts, "
                      f"{kube.faulted} API faults of {kube.requests} requests", flush=True)

        # --- settle: stop breaking things; everything up; the level-triggered loops run
        kube.clear()
        for name in list(down):
            killable[name].start()
            del down[name]
        for proc in procs:
            if not proc.alive():
                proc.start()
        settle_started = timezone.now()
        client = get_client()
        print(f"chaos: settling (at most {args.settle:.0f} s) ...", flush=True)
        deadline = time.monotonic() + args.settle
        kicked = 0.0
        checks: list[Check] = []
        while time.monotonic() < deadline:
            if time.monotonic() - kicked > 30:
                for task, queue in (("k8s_sync.relist", "k8s"), ("tenants.resync_pools", "k8s"),
                                    ("billing.ingest_ledger", "billing")):
                    celery_app.send_task(task, queue=queue)
                kicked = time.monotonic()
            time.sleep(10)
            _ledger, ingested = db_ledger()
            if ingested is None or ingested < settle_started:
                continue
            checks = check_all(now=timezone.now(), client=client)
            if all(c.ok for c in checks):
                break
        if not checks:
            checks = check_all(now=timezone.now(), client=client)
        settled = time.monotonic() - (deadline - args.settle)

        # --- the report
        kube_total = kube.faulted
        print("\n== Injected")
        print(f"  process kills (kill -9): {sum(kills.values())} "
              f"({', '.join(f'{k} {n}' for k, n in sorted(kills.items()))})")
        print(f"  Redis restarts (no persistence): {redis_restarts}")
        print(f"  API faults answered by kubesim: {kube_total} of {kube.requests} requests "
              f"({kube_total / max(1, kube.requests):.0%}; rules for: "
              f"{', '.join(f'{k} {n}' for k, n in sorted(kube.by_status.items()))})")
        print(f"  watch drops: {kube.drops} ({kube.dropped_connections} connections)")
        exits = [f"{p.name} {p.unexpected_exits}" for p in procs if p.unexpected_exits]
        print(f"  processes that exited by themselves: {', '.join(exits) or 'none'}")
        print("\n== Load")
        print(f"  jobs submitted: {len(submitted)}; API answers: "
              f"{', '.join(f'{k} {n}' for k, n in sorted(api.statuses.items()))}")
        print(f"  quota requests: {', '.join(f'{k} {n}' for k, n in sorted(approvals.items()))}")
        for line in api.errors[:10]:
            print(f"  API error: {line}")
        print(f"\n== Invariants (settled in {settled:.0f} s)")
        for c in checks:
            print(f"  [{'ok' if c.ok else 'FAIL'}] {c.name}: {c.detail}")
            for problem in c.problems:
                print(f"        {problem}")
        from portal import watchdog

        flagged = watchdog.report().flagged
        print(f"  watchdog: {len(flagged)} flagged"
              + "".join(f"\n        {f['kind']} {f['label']}: {f['reason']}" for f in flagged))
        targets = (sum(kills.values()) >= 20 and redis_restarts >= 2 and kube_total >= 1000)
        print(f"\n  targets (20 kills, 2 Redis restarts, 1,000 API faults): "
              f"{'reached' if targets else 'NOT reached'}")
        return 0 if all(c.ok for c in checks) and (targets or args.minutes < 5) else 1
    finally:
        stop_everything()


if __name__ == "__main__":
    sys.exit(main())
