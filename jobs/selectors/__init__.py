"""Reads of the jobs app, by concern (every read; the plain inputs of pure code).

* :mod:`~jobs.selectors.listing`: a tenant's jobs, the platform queue, one job;
* :mod:`~jobs.selectors.inventory`: node shapes, GPU kinds, storage left, card facts;
* :mod:`~jobs.selectors.admission`: the admission engine's inputs and its decisions with
  the jobs whose pool the cluster does not show;
* :mod:`~jobs.selectors.use`: what active jobs hold ("in use" of pools);
* :mod:`~jobs.selectors.history`: the run history the ETAs read;
* :mod:`~jobs.selectors.spec`: a job's frozen spec for the cluster;
* :mod:`~jobs.selectors.preview`: the job form's live preview;
* :mod:`~jobs.selectors.pods`: a job's pods, logs, GPU utilisation and events;
* :mod:`~jobs.selectors.windows`: maintenance windows;
* :mod:`~jobs.selectors.health`: jobs that do not progress, and why;
* :mod:`~jobs.selectors.eta`: how far recent ETAs were right.

The public names are re-exported here (``from jobs import selectors;
selectors.job_spec(...)``). The submodules import each other directly, never this
package, so they form no cycle. A monkeypatch of a name here reaches the callers that
call it through the package (``selectors.admission_inputs(now)``), not the submodules'
own calls: patch the submodule for those.
"""

from jobs.selectors.admission import (
    VIEW_FIELDS,
    active_rows,
    admission_inputs,
    decide_with_pools_absent,
    reclaim_grace,
)
from jobs.selectors.eta import (
    EtaAccuracy,
    eta_accuracy,
    job_eta_accuracy,
)
from jobs.selectors.health import (
    job_health,
    start_observations,
    stuck_jobs,
)
from jobs.selectors.history import (
    job_history,
    recent_history,
)
from jobs.selectors.inventory import (
    GIB,
    gpu_kind_label,
    inventory,
    observed_card_facts,
    physical_use_now,
    storage_left,
)
from jobs.selectors.listing import (
    QUEUE_FILTERS,
    QUEUE_SORTS,
    PlatformQueue,
    granted_gpu_models,
    job_or_404,
    jobs_for_tenant,
    platform_queue,
    transitions_of,
)
from jobs.selectors.pods import (
    LOG_DOWNLOAD_BYTES,
    LOG_PROBLEMS,
    LOG_TAIL_LINES,
    LOG_VIEW_BYTES,
    POD_UTIL_CACHE_SECONDS,
    PodLog,
    events_of,
    job_pod_or_404,
    log_pods,
    mean_gpu_utilisation,
    pod_gpu_utilisation,
    pod_log,
    pods_of,
)
from jobs.selectors.preview import (
    preview,
)
from jobs.selectors.spec import (
    job_spec,
)
from jobs.selectors.use import (
    holding_use,
    in_use_by_pool,
    job_demand_of,
    job_resources,
)
from jobs.selectors.windows import (
    maintenance_held_nodes,
    open_windows,
    target_windows,
    window_scope,
    window_targets,
    windows_to_release,
)

__all__ = [
    "GIB",
    "LOG_DOWNLOAD_BYTES",
    "LOG_PROBLEMS",
    "LOG_TAIL_LINES",
    "LOG_VIEW_BYTES",
    "POD_UTIL_CACHE_SECONDS",
    "QUEUE_FILTERS",
    "QUEUE_SORTS",
    "VIEW_FIELDS",
    "EtaAccuracy",
    "PlatformQueue",
    "PodLog",
    "active_rows",
    "admission_inputs",
    "decide_with_pools_absent",
    "eta_accuracy",
    "events_of",
    "gpu_kind_label",
    "granted_gpu_models",
    "holding_use",
    "in_use_by_pool",
    "inventory",
    "job_demand_of",
    "job_eta_accuracy",
    "job_health",
    "job_history",
    "job_or_404",
    "job_pod_or_404",
    "job_resources",
    "job_spec",
    "jobs_for_tenant",
    "log_pods",
    "maintenance_held_nodes",
    "mean_gpu_utilisation",
    "observed_card_facts",
    "open_windows",
    "physical_use_now",
    "platform_queue",
    "pod_gpu_utilisation",
    "pod_log",
    "pods_of",
    "preview",
    "recent_history",
    "reclaim_grace",
    "start_observations",
    "storage_left",
    "stuck_jobs",
    "target_windows",
    "transitions_of",
    "window_scope",
    "window_targets",
    "windows_to_release",
]
