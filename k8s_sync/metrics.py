"""The GPU metrics source: DCGM-exporter metrics and pod network counters, as plain data.

Two ways in, chosen from settings by :meth:`MetricsSource.from_settings`:

* ``PROMETHEUS_URL`` set: instant queries against the Prometheus HTTP API
  (``GET <url>/api/v1/query``), optional bearer ``PROMETHEUS_TOKEN``;
* otherwise: scrape dcgm-exporter-style ``/metrics`` text directly. The endpoints are
  ``TRAINYARD_DCGM_URLS`` when set, else ``<cluster base URL>/metrics`` (the embedded
  kubesim serves DCGM and cAdvisor-style metrics there). :func:`cluster_base_url` gives
  the base URL of the configured cluster (mode ``url``: the url; mode ``kubeconfig``: the
  current context's ``server``; ``in-cluster``: ``None``, so set one of the above).

Label variants (dcgm-exporter versions and Prometheus relabelling differ) are normalised here:
``Hostname``/``hostname``, ``modelName``/``model_name``, ``UUID``/``uuid``, and for the
workload the first *present* of ``exported_namespace`` (Prometheus with
``honorLabels: false``), ``pod_namespace`` (``--use-old-namespace``), ``namespace``; the
same for ``pod`` and ``container``. GPU utilisation is ``DCGM_FI_DEV_GPU_UTIL`` (%) for
whole cards and ``100 * DCGM_FI_PROF_GR_ENGINE_ACTIVE`` for MIG instances (where
GPU_UTIL is not supported) or wherever GPU_UTIL is missing.

Egress (what billing charges for) comes from the metric family
``TRAINYARD_EGRESS_METRICS`` names (:data:`EGRESS_FAMILIES`):

* ``network-costs`` (default): the OpenCost/Kubecost network-costs daemonset's
  ``kubecost_pod_network_egress_bytes_total``, one counter per pod and destination class,
  labelled ``internet``, ``sameRegion`` and ``sameZone`` (``same_region``/``same_zone`` in
  OpenCost's newer spelling; the pod in ``pod_name``, its namespace in ``namespace``).
  :func:`egress_class` reads the labels: traffic within the zone, a job's own pod-to-pod
  traffic among them, is ``in_cluster``;
* ``cadvisor``: ``container_network_transmit_bytes_total``, every byte a pod sent
  (``unclassified``: the cluster's own traffic included).

Errors: every failure (no endpoint configured, connection error, timeout, non-2xx
status, a Prometheus ``"status": "error"`` envelope, unparsable text) raises
:class:`MetricsUnavailable`, a :class:`k8s_sync.client.K8sError`. Its ``transient`` flag
(read by :func:`k8s_sync.client.is_transient`) is True for timeouts, connection errors,
429 and 5xx, False for configuration problems and other 4xx. Nothing else escapes.
Every request carries a timeout (``TRAINYARD_METRICS_SOURCE_TIMEOUT``, default 5 s).

This module imports neither ``kubernetes`` nor any domain app; it reads the kubeconfig
with PyYAML.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import urllib3
import yaml
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from core.choices import EgressClass
from k8s_sync.client import ClusterConfig, K8sError, from_django_settings

__all__ = [
    "DCGM_METRICS",
    "EGRESS_FAMILIES",
    "NETWORK_METRICS",
    "GpuSample",
    "MetricsSnapshot",
    "MetricsSource",
    "MetricsUnavailable",
    "cluster_base_url",
    "egress_class",
    "gpu_samples",
    "pod_egress_bytes",
    "pod_network_bytes",
]

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
DCGM_METRICS = (GPU_UTIL, FB_USED, FB_FREE, GR_ENGINE_ACTIVE)
NET_TX = "container_network_transmit_bytes_total"
NET_RX = "container_network_receive_bytes_total"
NETWORK_METRICS = (NET_TX, NET_RX)
NET_EGRESS = "kubecost_pod_network_egress_bytes_total"
#: The metric families egress can be billed from (``TRAINYARD_EGRESS_METRICS``).
EGRESS_FAMILIES = {"network-costs": NET_EGRESS, "cadvisor": NET_TX}
_EGRESS_LABELS = ("internet", "sameRegion", "same_region", "sameZone", "same_zone")

# Label variants, most specific first: the first one *present* wins (even when empty, so
# an idle GPU's exported_pod="" is not mistaken for the exporter's own pod label).
_NAMESPACE_KEYS = ("exported_namespace", "pod_namespace", "namespace")
_POD_KEYS = ("exported_pod", "pod_name", "pod")
_CONTAINER_KEYS = ("exported_container", "container_name", "container")
_HOST_KEYS = ("Hostname", "hostname", "kubernetes_node", "node")
_MODEL_KEYS = ("modelName", "model_name")
_UUID_KEYS = ("UUID", "uuid")
_MIG_KEYS = ("GPU_I_PROFILE", "dra_mig_profile")


class MetricsUnavailable(K8sError):
    """The metrics source could not answer; ``transient`` says whether a retry may help."""

    def __init__(self, status: int | None, reason: str, message: str, *,
                 transient: bool = True, **kwargs: Any):
        super().__init__(status, reason, message, **kwargs)
        self.transient = transient

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.status, self.reason, self.message),
                {"retry_after": self.retry_after, "details": self.details,
                 "transient": self.transient})


@dataclass(frozen=True)
class GpuSample:
    """One GPU (or MIG instance, or shared slice) as one pod sees it, now.

    ``namespace``/``pod`` are ``""`` for an idle device (dcgm-exporter reports idle GPUs
    with empty pod labels). ``util_pct`` is 0-100; memory is MiB. ``mig_profile`` is
    ``""`` for whole cards.
    """

    namespace: str
    pod: str
    node: str
    gpu: str
    uuid: str
    model: str
    util_pct: float
    fb_used_mib: float
    fb_free_mib: float
    mig_profile: str = ""
    container: str = ""
    gpu_instance: str = ""

    @property
    def idle(self) -> bool:
        return not self.pod


@dataclass(frozen=True)
class MetricsSnapshot:
    """Everything one sampling pass needs, from a single scrape (or two queries)."""

    gpus: tuple[GpuSample, ...]
    network: Mapping[tuple[str, str], tuple[int, int]]


# --- where the metrics are ---------------------------------------------------------------


def cluster_base_url(config: ClusterConfig | None = None) -> str | None:
    """The configured cluster's base URL (no trailing slash), or None (in-cluster).

    Mode ``url``: the url. Mode ``kubeconfig``: ``server`` of the current (or configured)
    context's cluster in the kubeconfig file (``$KUBECONFIG``'s first entry, or
    ``~/.kube/config``). Raises :class:`MetricsUnavailable` (not transient) when the
    kubeconfig cannot be read.
    """
    cfg = config or from_django_settings()
    if cfg.mode == "url":
        return (cfg.url or "").rstrip("/") or None
    if cfg.mode != "kubeconfig":
        return None
    server, _ = _kubeconfig_cluster(cfg)
    return server


def _kubeconfig_path(cfg: ClusterConfig) -> Path:
    if cfg.kubeconfig:
        return Path(cfg.kubeconfig.split(os.pathsep)[0]).expanduser()
    env = os.environ.get("KUBECONFIG", "")
    return Path(env.split(os.pathsep)[0] if env else "~/.kube/config").expanduser()


def _kubeconfig_cluster(cfg: ClusterConfig) -> tuple[str | None, dict[str, Any]]:
    """(server, cluster entry) of the kubeconfig's context."""
    path = _kubeconfig_path(cfg)
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise MetricsUnavailable(None, "ConfigError", f"cannot read kubeconfig {path}: {exc}",
                                 transient=False) from exc
    context_name = cfg.context or doc.get("current-context")
    contexts = {c.get("name"): c.get("context") or {} for c in doc.get("contexts") or []}
    clusters = {c.get("name"): c.get("cluster") or {} for c in doc.get("clusters") or []}
    context = contexts.get(context_name) or {}
    cluster = clusters.get(context.get("cluster")) or {}
    if not cluster and len(clusters) == 1:
        cluster = next(iter(clusters.values()))
    server = str(cluster.get("server") or "").rstrip("/") or None
    return server, cluster


# --- the source ----------------------------------------------------------------------------


class MetricsSource:
    """Reads DCGM GPU metrics and pod network counters from Prometheus or a scrape.

    ``MetricsSource(prometheus_url=...)`` or ``MetricsSource(scrape_urls=[...])``; most
    code uses :meth:`from_settings`. Thread-safe (one urllib3 pool per source).
    """

    def __init__(self, *, prometheus_url: str | None = None,
                 scrape_urls: Sequence[str] = (), token: str | None = None,
                 timeout: float = 5.0, verify_ssl: bool = True,
                 ca_certs: str | None = None):
        if not prometheus_url and not scrape_urls:
            raise MetricsUnavailable(None, "NotConfigured",
                                     "no PROMETHEUS_URL and no /metrics endpoint to scrape",
                                     transient=False)
        if timeout <= 0:
            raise ValueError("timeout must be > 0 seconds")
        self.prometheus_url = (prometheus_url or "").rstrip("/") or None
        self.scrape_urls = tuple(scrape_urls)
        self.timeout = float(timeout)
        self._headers = {"Accept": "text/plain;version=0.0.4, application/json;q=0.9"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        kwargs: dict[str, Any] = {"retries": urllib3.Retry(connect=1, read=0, redirect=2,
                                                           status=0),
                                  "timeout": urllib3.Timeout(total=self.timeout)}
        if not verify_ssl:
            kwargs["cert_reqs"] = "CERT_NONE"
        elif ca_certs:
            kwargs["ca_certs"] = ca_certs
        self._http = urllib3.PoolManager(num_pools=4, **kwargs)

    @property
    def kind(self) -> str:
        """``"prometheus"`` or ``"scrape"``."""
        return "prometheus" if self.prometheus_url else "scrape"

    def __repr__(self) -> str:
        where = self.prometheus_url or ",".join(self.scrape_urls)
        return f"MetricsSource({self.kind}: {where})"

    @classmethod
    def from_settings(cls) -> MetricsSource:
        """Built from Django settings (see the module docstring)."""
        timeout = float(getattr(settings, "TRAINYARD_METRICS_SOURCE_TIMEOUT", 5.0) or 5.0)
        prometheus = getattr(settings, "PROMETHEUS_URL", "") or ""
        if prometheus:
            return cls(prometheus_url=prometheus,
                       token=getattr(settings, "PROMETHEUS_TOKEN", "") or None,
                       timeout=timeout)
        urls = list(getattr(settings, "TRAINYARD_DCGM_URLS", []) or [])
        if urls:
            return cls(scrape_urls=urls, timeout=timeout)
        cfg = from_django_settings()
        token: str | None = None
        verify, ca = cfg.verify_ssl, None
        if cfg.mode == "url":
            base = (cfg.url or "").rstrip("/") or None
            token = cfg.token
        elif cfg.mode == "kubeconfig":
            base, cluster = _kubeconfig_cluster(cfg)
            if cluster.get("insecure-skip-tls-verify"):
                verify = False
            ca = cluster.get("certificate-authority") or None
        else:
            base = None
        if not base:
            raise MetricsUnavailable(None, "NotConfigured",
                                     f"cluster mode {cfg.mode!r} has no base URL to scrape; "
                                     "set PROMETHEUS_URL or TRAINYARD_DCGM_URLS",
                                     transient=False)
        return cls(scrape_urls=[f"{base}/metrics"], token=token, timeout=timeout,
                   verify_ssl=verify, ca_certs=ca)

    # -- public reads ------------------------------------------------------------------

    def gpu_samples(self) -> list[GpuSample]:
        """Every GPU device now, one row per (device, pod); idle devices with pod ``""``."""
        if self.prometheus_url:
            return _gpu_samples(self._query_series(_dcgm_query()))
        return _gpu_samples(self._scrape_series(DCGM_METRICS))

    def pod_network_bytes(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(namespace, pod) -> (transmit, receive) byte counters, summed over interfaces."""
        if self.prometheus_url:
            series: list[tuple[str, dict[str, str], float]] = []
            for name in NETWORK_METRICS:
                q = (f"sum by (namespace, pod, exported_namespace, exported_pod) ({name}"
                     '{pod!="",interface!="lo"})')
                series += [(name, labels, value) for _, labels, value in self._query_series(q)]
            return _network(series)
        return _network(self._scrape_series(NETWORK_METRICS))

    def pod_egress_bytes(self, family: str | None = None
                         ) -> dict[tuple[str, str, str], int]:
        """(namespace, pod, destination class) -> bytes sent, a counter (see the module
        docstring), from ``family`` (default: ``TRAINYARD_EGRESS_METRICS``). An unknown
        family is a :class:`MetricsUnavailable` that is not transient."""
        family = family or getattr(settings, "TRAINYARD_EGRESS_METRICS", "") or "network-costs"
        name = EGRESS_FAMILIES.get(family)
        if name is None:
            raise MetricsUnavailable(None, "NotConfigured",
                                     f"unknown egress metric family {family!r}; one of "
                                     f"{', '.join(EGRESS_FAMILIES)}", transient=False)
        if not self.prometheus_url:
            return _egress(self._scrape_series([name]))
        by = "namespace, pod, exported_namespace, exported_pod"
        if name == NET_EGRESS:
            q = (f"sum by ({by}, pod_name, k8s_namespace_name, {', '.join(_EGRESS_LABELS)}) "
                 f"({name})")
        else:
            q = f'sum by ({by}) ({name}{{pod!="",interface!="lo"}})'
        return _egress([(name, labels, value) for _, labels, value in self._query_series(q)])

    def snapshot(self) -> MetricsSnapshot:
        """GPU samples and network counters; one HTTP round trip per endpoint when scraping."""
        if self.prometheus_url:
            return MetricsSnapshot(tuple(self.gpu_samples()), self.pod_network_bytes())
        series = self._scrape_series(DCGM_METRICS + NETWORK_METRICS)
        return MetricsSnapshot(tuple(_gpu_samples(series)), _network(series))

    def query(self, promql: str) -> list[tuple[dict[str, str], float]]:
        """An instant PromQL query (Prometheus sources only): [(labels, value)]."""
        if not self.prometheus_url:
            raise MetricsUnavailable(None, "NotSupported",
                                     "PromQL needs PROMETHEUS_URL", transient=False)
        return [(labels, value) for _, labels, value in self._query_series(promql)]

    # -- transport -----------------------------------------------------------------------

    def _get(self, url: str) -> bytes:
        try:
            resp = self._http.request("GET", url, headers=self._headers, preload_content=True)
        except urllib3.exceptions.HTTPError as exc:
            raise MetricsUnavailable(None, type(exc).__name__, f"{url}: {exc}") from exc
        if resp.status >= 300:
            body = resp.data.decode("utf-8", "replace")[:500]
            transient = resp.status in (408, 429) or resp.status >= 500
            raise MetricsUnavailable(resp.status, resp.reason or "HTTPError",
                                     f"{url}: {body}", transient=transient)
        return bytes(resp.data)

    def _scrape_series(self, names: Iterable[str]) -> list[tuple[str, dict[str, str], float]]:
        wanted = set(names)
        out: list[tuple[str, dict[str, str], float]] = []
        for url in self.scrape_urls:
            text = self._get(url).decode("utf-8", "replace")
            try:
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        if sample.name in wanted:
                            out.append((sample.name, dict(sample.labels), float(sample.value)))
            except (ValueError, TypeError) as exc:
                raise MetricsUnavailable(None, "BadMetricsText", f"{url}: {exc}") from exc
        return out

    def _query_series(self, promql: str) -> list[tuple[str, dict[str, str], float]]:
        url = f"{self.prometheus_url}/api/v1/query?" + urlencode(
            {"query": promql, "timeout": f"{max(1, int(self.timeout))}s"})
        raw = self._get(url)
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            raise MetricsUnavailable(None, "BadPrometheusResponse", str(exc)) from exc
        if not isinstance(payload, dict) or payload.get("status") != "success":
            err = payload.get("error") if isinstance(payload, dict) else repr(payload)[:200]
            raise MetricsUnavailable(None, str((payload or {}).get("errorType") or "error")
                                     if isinstance(payload, dict) else "error",
                                     f"query {promql!r}: {err}", transient=False)
        data = payload.get("data") or {}
        if data.get("resultType") != "vector":
            raise MetricsUnavailable(None, "BadPrometheusResponse",
                                     f"expected a vector, got {data.get('resultType')!r}",
                                     transient=False)
        out: list[tuple[str, dict[str, str], float]] = []
        for item in data.get("result") or []:
            labels = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
            try:
                value = float((item.get("value") or [0, "NaN"])[1])
            except (TypeError, ValueError, IndexError):
                continue
            out.append((labels.pop("__name__", ""), labels, value))
        return out


def _dcgm_query() -> str:
    return '{__name__=~"' + "|".join(DCGM_METRICS) + '"}'


# --- normalisation ---------------------------------------------------------------------------


def _first(labels: Mapping[str, str], keys: Iterable[str]) -> str:
    for key in keys:
        if key in labels:
            return labels[key]
    return ""


def _workload(labels: Mapping[str, str]) -> tuple[str, str, str]:
    """(namespace, pod, container) of the workload, whichever label form is present."""
    # With honorLabels false the exporter's own pod/namespace sit in pod/namespace and the
    # workload's in exported_*: exported_* wins whenever present.
    return (_first(labels, _NAMESPACE_KEYS), _first(labels, _POD_KEYS),
            _first(labels, _CONTAINER_KEYS))


def _finite(value: float) -> bool:
    return not (math.isnan(value) or math.isinf(value))


def _gpu_samples(series: Iterable[tuple[str, dict[str, str], float]]) -> list[GpuSample]:
    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    for name, labels, value in series:
        if name not in DCGM_METRICS or not _finite(value):
            continue
        namespace, pod, container = _workload(labels)
        node = _first(labels, _HOST_KEYS)
        gpu = labels.get("gpu", "")
        uuid = _first(labels, _UUID_KEYS)
        instance = labels.get("GPU_I_ID", "")
        key = (node, uuid or gpu, instance, namespace, pod)
        row = rows.get(key)
        if row is None:
            row = rows[key] = {
                "namespace": namespace, "pod": pod, "container": container, "node": node,
                "gpu": gpu, "uuid": uuid, "model": _first(labels, _MODEL_KEYS),
                "mig_profile": _first(labels, _MIG_KEYS), "gpu_instance": instance,
            }
        row[name] = value
    out = []
    for row in rows.values():
        mig = bool(row["mig_profile"])
        if not mig and GPU_UTIL in row:
            util = row[GPU_UTIL]
        elif GR_ENGINE_ACTIVE in row:
            util = 100.0 * row[GR_ENGINE_ACTIVE]
        else:
            util = row.get(GPU_UTIL, 0.0)
        out.append(GpuSample(
            namespace=row["namespace"], pod=row["pod"], node=row["node"], gpu=row["gpu"],
            uuid=row["uuid"], model=row["model"], util_pct=max(0.0, min(100.0, util)),
            fb_used_mib=max(0.0, row.get(FB_USED, 0.0)),
            fb_free_mib=max(0.0, row.get(FB_FREE, 0.0)), mig_profile=row["mig_profile"],
            container=row["container"], gpu_instance=row["gpu_instance"],
        ))
    out.sort(key=lambda s: (s.node, s.gpu, s.gpu_instance, s.namespace, s.pod))
    return out


def _network(series: Iterable[tuple[str, dict[str, str], float]]
             ) -> dict[tuple[str, str], tuple[int, int]]:
    acc: dict[tuple[str, str], list[int]] = {}
    for name, labels, value in series:
        if name not in NETWORK_METRICS or not _finite(value):
            continue
        if labels.get("interface") == "lo":
            continue
        namespace, pod, _ = _workload(labels)
        if not pod:
            continue
        pair = acc.setdefault((namespace, pod), [0, 0])
        pair[0 if name == NET_TX else 1] += int(value)
    return {key: (tx, rx) for key, (tx, rx) in acc.items()}


def egress_class(labels: Mapping[str, str]) -> EgressClass:
    """The destination class of a network-costs series from its labels: ``internet``
    true, else ``sameRegion`` false (other regions), else ``sameZone`` false (other
    zones), else within the zone; a series with none of these labels is unclassified."""
    if not any(key in labels for key in _EGRESS_LABELS):
        return EgressClass.UNCLASSIFIED
    if labels.get("internet", "").lower() == "true":
        return EgressClass.INTERNET
    if _first(labels, ("sameRegion", "same_region")).lower() == "false":
        return EgressClass.CROSS_REGION
    if _first(labels, ("sameZone", "same_zone")).lower() == "false":
        return EgressClass.CROSS_ZONE
    return EgressClass.IN_CLUSTER


def _egress(series: Iterable[tuple[str, dict[str, str], float]]
            ) -> dict[tuple[str, str, str], int]:
    acc: dict[tuple[str, str, str], int] = {}
    for name, labels, value in series:
        if not _finite(value) or name not in EGRESS_FAMILIES.values():
            continue
        if name == NET_TX:
            if labels.get("interface") == "lo":
                continue
            destination = EgressClass.UNCLASSIFIED
        else:
            destination = egress_class(labels)
        namespace = _first(labels, (*_NAMESPACE_KEYS, "k8s_namespace_name"))
        pod = _first(labels, _POD_KEYS)
        if not pod or not namespace:
            continue
        key = (namespace, pod, str(destination))
        acc[key] = acc.get(key, 0) + int(value)
    return acc


# --- module-level convenience --------------------------------------------------------------


def gpu_samples() -> list[GpuSample]:
    """:meth:`MetricsSource.gpu_samples` of the source configured in settings."""
    return MetricsSource.from_settings().gpu_samples()


def pod_egress_bytes(family: str | None = None) -> dict[tuple[str, str, str], int]:
    """:meth:`MetricsSource.pod_egress_bytes` of the source configured in settings."""
    return MetricsSource.from_settings().pod_egress_bytes(family)


def pod_network_bytes() -> dict[tuple[str, str], tuple[int, int]]:
    """:meth:`MetricsSource.pod_network_bytes` of the source configured in settings."""
    return MetricsSource.from_settings().pod_network_bytes()
