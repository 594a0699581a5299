"""The Kubernetes adapter: the only module of Trainyard that imports ``kubernetes``.

It speaks plain dict manifests for any kind and offers a few idempotent verbs:

* :meth:`KubeClient.apply` - server-side apply (create or update, declarative);
* :meth:`KubeClient.ensure_absent` - delete; "already gone" (404) is success;
* :meth:`KubeClient.read` - the object, or ``None`` when it does not exist;
* :meth:`KubeClient.list_objects`, :meth:`KubeClient.patch`,
  :meth:`KubeClient.create_if_absent` (create-once objects such as PyTorchJobs).

Converging a set of objects (apply what differs, delete what is owned and no longer
declared) is :func:`k8s_sync.reconcile.converge`, built on these verbs.

Contracts:

* Every request carries ``_request_timeout`` (``ClusterConfig.request_timeout``).
* Every failure is a :class:`K8sError`: :class:`K8sTransientError` when trying again later
  may succeed (timeouts, connection errors, 5xx, 429 with ``retry_after``, 409 conflicts,
  410 Gone) and :class:`K8sPermanentError` when it will not (400, 401, 403, 404 where an
  object was expected, 422, AlreadyExists, ...), carrying the server's status code,
  reason and message. Nothing else escapes (programming errors aside).
* No retry loops here: callers (Celery tasks) retry on :func:`is_transient`. urllib3 is
  configured to re-try only a failed *connect* once and never a read, so a timeout
  costs one ``request_timeout``, not four.
* Kinds are mapped to REST paths by a static table of what Trainyard reads and writes,
  with API discovery as a fallback for any other kind (cached per client).
"""

from __future__ import annotations

import codecs
import contextlib
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal
from urllib.parse import quote, urlsplit

import urllib3
from django.conf import settings
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from k8s_sync import fastjson
from k8s_sync.maintenance import cordon_patch

__all__ = [
    "ClusterConfig",
    "K8sError",
    "K8sNotFoundError",
    "K8sPermanentError",
    "K8sTransientError",
    "KubeClient",
    "LogStream",
    "ObjectRef",
    "WatchStream",
    "from_django_settings",
    "get_client",
    "is_transient",
    "reset_clients",
]

Mode = Literal["kubeconfig", "in-cluster", "url"]
PatchType = Literal["merge", "strategic", "json"]
_PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"


# --- configuration ------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterConfig:
    """How to reach the cluster.

    ``mode``: ``"kubeconfig"`` (``kubeconfig`` path or the default ``~/.kube/config``, and
    an optional ``context``), ``"in-cluster"`` (the pod's ServiceAccount) or ``"url"`` (an
    explicit API server URL, e.g. the embedded kubesim; optional bearer ``token``).
    ``request_timeout`` (seconds) bounds every request.
    """

    mode: Mode = "kubeconfig"
    kubeconfig: str | None = None
    context: str | None = None
    url: str | None = None
    token: str | None = field(default=None, repr=False)
    verify_ssl: bool = True
    request_timeout: float = 10.0

    def __post_init__(self) -> None:
        if self.mode not in ("kubeconfig", "in-cluster", "url"):
            raise ValueError(f"unknown cluster mode {self.mode!r}")
        if self.mode == "url":
            try:
                parts = urlsplit(self.url or "")
                parts.port  # noqa: B018 - raises ValueError for a bad port
            except ValueError as exc:
                raise ValueError(f"invalid cluster url {self.url!r}: {exc}") from exc
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"mode 'url' needs an http(s) url, got {self.url!r}")
        if not self.request_timeout or self.request_timeout <= 0:
            raise ValueError("request_timeout must be > 0 seconds")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> ClusterConfig:
        """Build from a settings dict.

        Empty strings mean "not set". Keys read by other code (``embedded``: whether
        ``make run`` starts kubesim) are ignored; any other unknown key raises
        ``ValueError`` so a typo fails loudly instead of silently using a default.
        """
        known = set(cls.__dataclass_fields__)
        unknown = set(values) - known - _FOREIGN_SETTINGS_KEYS
        if unknown:
            raise ValueError(f"unknown TRAINYARD_CLUSTER keys: {sorted(unknown)}")
        data = {k: v for k, v in values.items() if k in known and v != "" and v is not None}
        if "request_timeout" in data:
            data["request_timeout"] = float(data["request_timeout"])
        return cls(**data)


_FOREIGN_SETTINGS_KEYS = frozenset({"embedded"})


def from_django_settings() -> ClusterConfig:
    """``ClusterConfig`` from ``settings.TRAINYARD_CLUSTER`` (a dict); read lazily."""
    return ClusterConfig.from_mapping(getattr(settings, "TRAINYARD_CLUSTER", {}) or {})


def _configuration(cfg: ClusterConfig) -> k8s_client.Configuration:
    conf = k8s_client.Configuration()
    try:
        if cfg.mode == "kubeconfig":
            k8s_config.load_kube_config(config_file=cfg.kubeconfig, context=cfg.context,
                                        client_configuration=conf, persist_config=False)
        elif cfg.mode == "in-cluster":
            k8s_config.load_incluster_config(client_configuration=conf)
        else:
            conf.host = (cfg.url or "").rstrip("/")
            conf.verify_ssl = cfg.verify_ssl
            if cfg.token:
                conf.api_key = {"BearerToken": cfg.token}
                conf.api_key_prefix = {"BearerToken": "Bearer"}
    except (ConfigException, OSError) as exc:
        raise K8sPermanentError(None, "ConfigError", f"cannot load cluster config: {exc}") from exc
    # One connect retry (a stale pooled socket), never a read/status retry: retrying is
    # the caller's job, and a read retry would multiply the timeout. urllib3 would also
    # silently sleep and retry 429/503 responses carrying Retry-After; hand them to us.
    conf.retries = urllib3.Retry(total=1, connect=1, read=0, redirect=0, status=0, other=0,
                                 respect_retry_after_header=False, raise_on_status=False)
    return conf


# --- errors ---------------------------------------------------------------------------------


_NAMESPACE_NOT_FOUND = re.compile(r'namespaces "([a-z0-9][-a-z0-9]*)" not found')
_NAMESPACE_TERMINATING = "The system is ensuring all content is removed from this namespace"


class K8sError(Exception):
    """A failed Kubernetes call. ``status`` is the HTTP code (``None`` without a response)."""

    transient = False

    def __init__(self, status: int | None, reason: str, message: str, *,
                 retry_after: float | None = None, details: Mapping[str, Any] | None = None):
        super().__init__(f"{status or '-'} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.details = dict(details or {})

    @property
    def quota_exceeded(self) -> bool:
        """True for a 403 from quota admission (as opposed to an RBAC 403)."""
        return self.status == 403 and ("exceeded quota" in self.message
                                       or "failed quota" in self.message)

    @property
    def namespace_missing(self) -> str:
        """The namespace a 404 says does not exist (``namespaces "x" not found``: the
        object's namespace is not in the cluster yet, or no more), else ``""``. Another
        404 (a missing API, a missing object) is not this."""
        if self.status != 404:
            return ""
        if self.details.get("kind") == "namespaces" and self.details.get("name"):
            return str(self.details["name"])
        found = _NAMESPACE_NOT_FOUND.search(self.message or "")
        return found.group(1) if found else ""

    @property
    def namespace_terminating(self) -> bool:
        """True for the 409 a DELETE of a namespace that is already terminating gets while
        its content is being removed (pkg/registry/core/namespace/storage/storage.go
        Delete: "The system is ensuring all content is removed from this namespace").
        The namespace is on its way out: for someone who wants it gone, that is success."""
        return self.status == 409 and _NAMESPACE_TERMINATING in (self.message or "")

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable despite the custom __init__ (Celery/multiprocessing ship exceptions).
        return (type(self), (self.status, self.reason, self.message),
                {"retry_after": self.retry_after, "details": self.details})


class K8sTransientError(K8sError):
    """Trying again later may succeed. ``retry_after`` (seconds) is set for 429/503."""

    transient = True


class K8sPermanentError(K8sError):
    """Trying again will fail the same way until something (a manifest, RBAC) changes."""


class K8sNotFoundError(K8sPermanentError):
    """404 where an object was expected (``read``/``ensure_absent`` never raise it)."""


def is_transient(exc: BaseException) -> bool:
    """True if ``exc`` is a :class:`K8sError` worth retrying later."""
    return isinstance(exc, K8sError) and exc.transient


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def _error_from_response(status: int, http_reason: str, headers: Mapping[str, str],
                         body: bytes) -> K8sError:
    """Classify a non-2xx response; the Status body gives reason and message."""
    reason = http_reason or ""
    message = body.decode("utf-8", "replace")[:2000]
    details: dict[str, Any] = {}
    try:
        payload = fastjson.loads(body)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        reason = str(payload.get("reason") or reason)
        message = str(payload.get("message") or message)
        details = payload.get("details") or {}
    kwargs: dict[str, Any] = {"details": details}
    if status in (429, 503):
        kwargs["retry_after"] = _retry_after(headers.get("Retry-After"))
    if status == 404:
        return K8sNotFoundError(status, reason or "NotFound", message, **kwargs)
    if status == 409 and reason == "AlreadyExists":
        return K8sPermanentError(status, reason, message, **kwargs)
    if status in (408, 409, 410, 429) or status >= 500:
        return K8sTransientError(status, reason, message, **kwargs)
    return K8sPermanentError(status, reason, message, **kwargs)


# --- objects --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ObjectRef:
    """Identity of one object: apiVersion, kind, name and namespace (None if cluster-wide)."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        try:
            meta = obj["metadata"]
            return cls(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"manifest lacks apiVersion/kind/metadata.name: {exc}") from exc

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}.{self.api_version} {where}{self.name}"


# (apiVersion, kind) -> (plural, namespaced) for what Trainyard reads and writes.
_STATIC_RESOURCES: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "Node"): ("nodes", False),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("v1", "ResourceQuota"): ("resourcequotas", True),
    ("v1", "LimitRange"): ("limitranges", True),
    ("v1", "Pod"): ("pods", True),
    ("v1", "Event"): ("events", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Service"): ("services", True),
    ("v1", "PersistentVolumeClaim"): ("persistentvolumeclaims", True),
    ("events.k8s.io/v1", "Event"): ("events", True),
    ("rbac.authorization.k8s.io/v1", "Role"): ("roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("rolebindings", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("networking.k8s.io/v1", "NetworkPolicy"): ("networkpolicies", True),
    ("scheduling.k8s.io/v1", "PriorityClass"): ("priorityclasses", False),
    ("batch/v1", "Job"): ("jobs", True),
    ("kubeflow.org/v1", "PyTorchJob"): ("pytorchjobs", True),
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): ("trainjobs", True),

    # Kueue (kueue.x-k8s.io/v1beta2): what Trainyard writes and reads in Kueue mode.
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"): ("clusterqueues", False),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"): ("localqueues", True),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): ("resourceflavors", False),
    ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"): ("workloadpriorityclasses", False),
    ("kueue.x-k8s.io/v1beta2", "Cohort"): ("cohorts", False),
    ("kueue.x-k8s.io/v1beta2", "Topology"): ("topologies", False),
    ("kueue.x-k8s.io/v1beta2", "Workload"): ("workloads", True),
}
#: Kueue's visibility API (an aggregated API server, not a CRD): pending workloads.
KUEUE_VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"


# --- the client -----------------------------------------------------------------------------


class KubeClient:
    """Idempotent verbs on plain manifests against one cluster. Thread-safe."""

    def __init__(self, config: ClusterConfig, api_client: k8s_client.ApiClient | None = None):
        self.config = config
        self._api = api_client or k8s_client.ApiClient(_configuration(config))
        self._discovered: dict[tuple[str, str], tuple[str, bool]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Release the connection pool."""
        self._api.close()

    # -- transport ---------------------------------------------------------------------

    def _request(self, method: str, path: str, *, query: Iterable[tuple[str, Any]] = (),
                 body: Any = None, content_type: str | None = None) -> Any:
        """One HTTP call; returns the decoded JSON body or raises a classified K8sError.

        The body is read as bytes (the REST layer never preloads nor deserialises into
        the official client's models) and decoded with orjson (:mod:`k8s_sync.fastjson`).
        """
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        query_list = [(k, v) for k, v in query if v is not None]
        try:
            req = self._api.param_serialize(
                method=method, resource_path=path, query_params=query_list or None,
                header_params=headers, body=body, auth_settings=["BearerToken"],
            )
            resp = self._api.call_api(*req, _request_timeout=self.config.request_timeout)
            raw = resp.read() or b""
        except urllib3.exceptions.LocationValueError as exc:  # a malformed URL: configuration
            raise K8sPermanentError(None, "ConfigError", str(exc)) from exc
        except urllib3.exceptions.HTTPError as exc:
            # Timeouts, refused/reset connections, protocol errors, exhausted retries; a
            # certificate that does not verify is configuration, not bad luck.
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, urllib3.exceptions.SSLError) and "CERTIFICATE_VERIFY" in str(
                reason
            ):
                raise K8sPermanentError(None, "SSLError", str(reason)) from exc
            raise K8sTransientError(None, type(exc).__name__, str(exc)) from exc
        except OSError as exc:
            raise K8sTransientError(None, type(exc).__name__, str(exc)) from exc
        except k8s_client.ApiException as exc:  # raised by the REST layer for TLS errors
            raise K8sPermanentError(exc.status or None, "TransportError",
                                    str(exc.reason)) from exc
        if not 200 <= resp.status <= 299:
            raise _error_from_response(resp.status, resp.reason or "", resp.headers, raw)
        if not raw:
            return None
        try:
            return fastjson.loads(raw)
        except ValueError as exc:
            raise K8sPermanentError(resp.status, "BadResponse",
                                    f"response is not JSON: {raw[:200]!r}") from exc

    # -- paths -------------------------------------------------------------------------

    def _resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        key = (api_version, kind)
        if key in _STATIC_RESOURCES:
            return _STATIC_RESOURCES[key]
        with self._lock:
            if key in self._discovered:
                return self._discovered[key]
        try:
            listing = self._request("GET", _base_path(api_version)) or {}
        except K8sNotFoundError as exc:  # an unknown group is not "object not found"
            raise K8sPermanentError(404, "NotFound",
                                    f"the server does not serve {api_version}") from exc
        found = None
        for res in listing.get("resources", []):
            if res.get("kind") == kind and "/" not in res.get("name", ""):
                found = (res["name"], bool(res.get("namespaced")))
                break
        if found is None:
            raise K8sPermanentError(404, "NotFound",
                                    f"the server has no resource of kind {kind} in {api_version}")
        with self._lock:
            self._discovered[key] = found
        return found

    def _path(self, api_version: str, kind: str, name: str | None = None,
              namespace: str | None = None, *, listing: bool = False) -> str:
        plural, namespaced = self._resource(api_version, kind)
        base = _base_path(api_version)
        if namespaced and namespace:
            base = f"{base}/namespaces/{quote(namespace, safe='')}"
        elif namespaced and not listing:
            raise ValueError(f"{kind} is namespaced: a namespace is required")
        elif not namespaced and namespace:
            raise ValueError(f"{kind} is cluster-scoped: no namespace expected")
        path = f"{base}/{plural}"
        return f"{path}/{quote(name, safe='')}" if name else path

    # -- verbs -------------------------------------------------------------------------

    def read(self, api_version: str, kind: str, name: str,
             namespace: str | None = None) -> dict[str, Any] | None:
        """The object as stored, or ``None`` if it does not exist (404)."""
        try:
            return self._request("GET", self._path(api_version, kind, name, namespace))
        except K8sNotFoundError:
            return None

    def list_objects(self, api_version: str, kind: str, namespace: str | None = None, *,
                     label_selector: str | None = None, field_selector: str | None = None,
                     page_size: int = 500) -> list[dict[str, Any]]:
        """All matching objects (every page); ``namespace=None`` lists across namespaces.

        Items get ``apiVersion``/``kind`` filled in (list items omit them on the wire).
        """
        path = self._path(api_version, kind, None, namespace, listing=True)
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self._request("GET", path, query=[
                ("labelSelector", label_selector), ("fieldSelector", field_selector),
                ("limit", page_size), ("continue", token)]) or {}
            for item in page.get("items") or []:
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                items.append(item)
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    def apply(self, obj: Mapping[str, Any], *, field_manager: str = "trainyard",
              force: bool = True, dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply ``obj`` (create if missing); returns the stored object.

        ``obj`` is Trainyard's full intent for the fields it owns; fields it stops sending
        are removed if no other manager owns them. ``force=True`` takes over conflicting
        fields (Trainyard is the source of truth for what it manages). Immutable-field
        changes (PriorityClass value, RoleBinding roleRef) raise a permanent 422.
        """
        ref = ObjectRef.of(obj)
        body = _apply_body(obj)
        query: list[tuple[str, Any]] = [("fieldManager", field_manager)]
        if force:
            query.append(("force", "true"))
        if dry_run:
            query.append(("dryRun", "All"))
        path = self._path(ref.api_version, ref.kind, ref.name, ref.namespace)
        return self._request("PATCH", path, query=query, body=body,
                             content_type=APPLY_CONTENT_TYPE)

    def create_if_absent(self, obj: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """Create ``obj``; if it already exists, return the stored one instead.

        Returns ``(object, created)``. For create-once objects (PyTorchJobs) whose spec must
        not be re-applied; comparing the stored object with the intent is the caller's job.
        """
        ref = ObjectRef.of(obj)
        path = self._path(ref.api_version, ref.kind, None, ref.namespace, listing=True)
        try:
            return self._request("POST", path, body=_apply_body(obj)), True
        except K8sPermanentError as exc:
            if exc.status != 409:
                raise
        existing = self.read(ref.api_version, ref.kind, ref.name, ref.namespace)
        if existing is None:  # deleted in between: let the caller's retry create it
            raise K8sTransientError(409, "Conflict", f"{ref} vanished while being created")
        return existing, False

    def patch(self, api_version: str, kind: str, name: str, patch: Any,
              namespace: str | None = None, *, patch_type: PatchType = "merge",
              subresource: str | None = None, field_manager: str = "trainyard") -> dict[str, Any]:
        """Patch one object (merge, strategic-merge or JSON patch); returns the result.

        One PATCH request, no GET before it: the server applies the patch to what it
        stores. A missing object raises :class:`K8sNotFoundError`. Use
        ``subresource="status"`` to patch status.
        """
        if patch_type not in _PATCH_CONTENT_TYPES:
            raise ValueError(f"unknown patch_type {patch_type!r}")
        if patch_type == "json" and not isinstance(patch, list):
            raise ValueError("a JSON patch is a list of operations")
        path = self._path(api_version, kind, name, namespace)
        if subresource:
            path = f"{path}/{subresource}"
        return self._request("PATCH", path, query=[("fieldManager", field_manager)],
                             body=patch, content_type=_PATCH_CONTENT_TYPES[patch_type])

    def set_node_unschedulable(self, name: str, unschedulable: bool, *,
                               taint: Mapping[str, str] | None = None,
                               keep_unschedulable: bool = False,
                               taint_only: bool = False) -> dict[str, Any] | None:
        """Cordon (True) or uncordon (False) a node as ``kubectl cordon``/``uncordon`` do,
        with ``taint`` (:func:`k8s_sync.maintenance.cordon_patch`). Returns the node, or None
        when it does not exist. No write when it already is as asked; a concurrent change
        of the node is a 409 (transient: retry)."""
        node = self.read("v1", "Node", name)
        if node is None:
            return None
        patch = cordon_patch(node, unschedulable=unschedulable, taint=taint,
                             keep_unschedulable=keep_unschedulable, taint_only=taint_only)
        if patch is None:
            return node
        return self.patch("v1", "Node", name, patch)

    def ensure_absent(self, api_version: str, kind: str, name: str,
                      namespace: str | None = None, *,
                      propagation_policy: str = "Background") -> bool:
        """Delete the object; returns True if a delete was issued (or one is under way),
        False if already gone.

        A 404 (never existed, already deleted, or its namespace is gone) is success, and so
        is the 409 a namespace that is already terminating answers to a second DELETE.
        Deletion may complete asynchronously (finalizers, namespaces terminating).
        """
        path = self._path(api_version, kind, name, namespace)
        try:
            self._request("DELETE", path, query=[("propagationPolicy", propagation_policy)])
        except K8sNotFoundError:
            return False
        except K8sError as exc:
            if exc.namespace_terminating:
                return True
            raise
        return True

    def kueue_pending_workloads(self, cluster_queue: str, *, limit: int = 1000,
                                offset: int = 0) -> list[dict[str, Any]]:
        """The pending workloads of one ClusterQueue, in Kueue's order, from Kueue's
        visibility API (``GET .../clusterqueues/<name>/pendingworkloads``); each item
        carries ``positionInClusterQueue`` and ``positionInLocalQueue`` (0-based) and
        names its Workload in ``metadata``. A queue Kueue does not know is a
        :class:`K8sNotFoundError`."""
        path = f"{KUEUE_VISIBILITY}/clusterqueues/{quote(cluster_queue, safe='')}/pendingworkloads"
        body = self._request("GET", path, query=[("limit", int(limit)),
                                                 ("offset", int(offset))]) or {}
        return list(body.get("items") or [])

    def server_version(self) -> dict[str, Any]:
        """``GET /version`` (a cheap reachability check)."""
        return self._request("GET", "/version") or {}

    # -- observing (list + watch: the reflector in observe.py builds on these) -----------

    def list_with_resource_version(
            self, api_version: str, kind: str, namespace: str | None = None, *,
            label_selector: str | None = None, field_selector: str | None = None,
            page_size: int = 500) -> tuple[list[dict[str, Any]], str]:
        """Like :meth:`list_objects`, plus the list's ``resourceVersion``.

        That version is where a :meth:`watch` continues from without missing a change. An
        expired ``continue`` token while paging raises :class:`K8sTransientError` (410).
        """
        path = self._path(api_version, kind, None, namespace, listing=True)
        items: list[dict[str, Any]] = []
        token: str | None = None
        version = ""
        while True:
            page = self._request("GET", path, query=[
                ("labelSelector", label_selector), ("fieldSelector", field_selector),
                ("limit", page_size), ("continue", token)]) or {}
            meta = page.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            for item in page.get("items") or []:
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                items.append(item)
            token = meta.get("continue") or None
            if not token:
                return items, version

    def pod_log(self, namespace: str, name: str, *, container: str | None = None,
                previous: bool = False, tail_lines: int | None = None,
                since_seconds: int | None = None, since_time: str | None = None,
                limit_bytes: int | None = None, timestamps: bool = False,
                follow: bool = False) -> str | LogStream:
        """A container's log (the ``pods/log`` subresource): the text, or with ``follow``
        a :class:`LogStream` of text chunks that ends with the container (close it).

        The kubelet's refusals come back as a 400 :class:`K8sPermanentError` in its words
        ("previous terminated container ... not found", "... is waiting to start: ...");
        a pod that does not exist is a :class:`K8sNotFoundError`.
        """
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/log"
        query = [("container", container or None), ("previous", "true" if previous else None),
                 ("tailLines", tail_lines), ("sinceSeconds", since_seconds),
                 ("sinceTime", since_time or None), ("limitBytes", limit_bytes),
                 ("timestamps", "true" if timestamps else None),
                 ("follow", "true" if follow else None)]
        timeout: Any = self.config.request_timeout
        if follow:  # a quiet log is no error: wait up to a minute between chunks
            timeout = (self.config.request_timeout, self.config.request_timeout + 60)
        resp = self._open_get(path, query, "text/plain, application/json", timeout)
        if follow:
            return LogStream(resp)
        try:
            return (resp.data or b"").decode("utf-8", "replace")
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _stream_error(exc) from exc
        finally:
            resp.release_conn()

    def watch(self, api_version: str, kind: str, namespace: str | None = None, *,
              resource_version: str | None = None, label_selector: str | None = None,
              field_selector: str | None = None, timeout_seconds: int = 300,
              allow_bookmarks: bool = True) -> WatchStream:
        """Open a watch; iterate the result for ``(type, object)`` events.

        Types are ADDED, MODIFIED, DELETED and BOOKMARK (only ``metadata.resourceVersion``
        is meaningful). The server ends the stream after ``timeout_seconds`` (iteration
        then stops normally); the socket read timeout is that plus ``request_timeout``.
        An ERROR event raises the classified :class:`K8sError`: 410 Gone (the version is
        too old) is a :class:`K8sTransientError` with ``status == 410``, meaning "relist".
        ``close()`` on the stream, from any thread, ends the iteration quietly.
        """
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be > 0")
        path = self._path(api_version, kind, None, namespace, listing=True)
        query = [("watch", "true"), ("resourceVersion", resource_version or None),
                 ("labelSelector", label_selector), ("fieldSelector", field_selector),
                 ("timeoutSeconds", int(timeout_seconds)),
                 ("allowWatchBookmarks", "true" if allow_bookmarks else None)]
        timeout = (self.config.request_timeout, timeout_seconds + self.config.request_timeout)
        resp = self._open_get(path, query, "application/json", timeout)
        return WatchStream(resp, api_version, kind)

    def _open_get(self, path: str, query: list[tuple[str, Any]], accept: str,
                  timeout: Any) -> Any:
        """A GET whose body the caller reads (a watch, a log): the open urllib3 response
        of a 2xx answer; otherwise the classified :class:`K8sError` (``None`` values of
        ``query`` are left out)."""
        try:
            req = self._api.param_serialize(
                method="GET", resource_path=path,
                query_params=[(k, v) for k, v in query if v is not None],
                header_params={"Accept": accept}, auth_settings=["BearerToken"])
            resp = self._api.call_api(*req, _request_timeout=timeout).response
        except (urllib3.exceptions.HTTPError, OSError, k8s_client.ApiException) as exc:
            raise _stream_error(exc) from exc
        if not 200 <= resp.status <= 299:
            body = resp.data or b""
            resp.release_conn()
            raise _error_from_response(resp.status, resp.reason or "", resp.headers, body)
        return resp


class _OpenResponse:
    """A response body read as it arrives (a watch, a followed log)."""

    def __init__(self, response: Any):
        self._resp = response
        self._closed = False

    def close(self) -> None:
        """End it; safe to call twice and from another thread (unblocks a read)."""
        if self._closed:
            return
        self._closed = True
        # ValueError/RuntimeError: already released, or never connected.
        with contextlib.suppress(ValueError, RuntimeError, OSError, AttributeError):
            self._resp.shutdown()
        self._resp.release_conn()


class WatchStream(_OpenResponse):
    """An open watch response: iterate for ``(type, object)``; :meth:`close` ends it."""

    def __init__(self, response: Any, api_version: str, kind: str):
        super().__init__(response)
        self._api_version = api_version
        self._kind = kind
        self._buffer = b""

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        try:
            for chunk in self._resp.stream(None, decode_content=True):
                self._buffer += chunk
                if b"\n" not in chunk:
                    continue
                *lines, self._buffer = self._buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield self._event(line)
            if self._buffer.strip():
                yield self._event(self._buffer)
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            if not self._closed:  # close() from another thread breaks the read: not an error
                raise _stream_error(exc) from exc
        finally:
            self.close()

    def _event(self, line: bytes) -> tuple[str, dict[str, Any]]:
        try:
            event = fastjson.loads(line)
            etype, obj = str(event["type"]), event["object"]
        except (ValueError, KeyError, TypeError) as exc:
            raise K8sTransientError(None, "BadWatchEvent", f"{line[:200]!r}") from exc
        if etype == "ERROR":
            obj = obj if isinstance(obj, dict) else {}
            raise _error_from_response(int(obj.get("code") or 500), str(obj.get("reason") or ""),
                                       {}, fastjson.dumps_bytes(obj))
        obj.setdefault("apiVersion", self._api_version)
        obj.setdefault("kind", self._kind)
        return etype, obj


class LogStream(_OpenResponse):
    """A followed log: iterate for text chunks (``close()`` ends it, from any thread)."""

    def __iter__(self) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")  # a chunk may split a char
        try:
            for chunk in self._resp.stream(4096, decode_content=True):
                text = decoder.decode(chunk or b"")
                if text:
                    yield text
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if not self._closed:
                raise _stream_error(exc) from exc
        finally:
            self.close()


def _stream_error(exc: BaseException) -> K8sError:
    """Classify a transport failure of a watch like :meth:`KubeClient._request` does."""
    if isinstance(exc, k8s_client.ApiException):
        return K8sPermanentError(exc.status or None, "TransportError", str(exc.reason))
    if isinstance(exc, urllib3.exceptions.LocationValueError):
        return K8sPermanentError(None, "ConfigError", str(exc))
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, urllib3.exceptions.SSLError) and "CERTIFICATE_VERIFY" in str(reason):
        return K8sPermanentError(None, "SSLError", str(reason))
    if isinstance(exc, ValueError):  # a truncated or garbled stream: reconnect
        return K8sTransientError(None, "BadWatchStream", str(exc))
    return K8sTransientError(None, type(exc).__name__, str(exc))


def _base_path(api_version: str) -> str:
    if "/" in api_version:
        return f"/apis/{api_version}"
    return f"/api/{api_version}"


def _apply_body(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``obj`` without server-owned fields that would break an apply."""
    body = fastjson.loads(fastjson.dumps_bytes(obj))
    body.pop("status", None)
    meta = body.get("metadata") or {}
    for key in ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"):
        meta.pop(key, None)
    return body


# --- cached clients -----------------------------------------------------------------------

_clients: dict[ClusterConfig, KubeClient] = {}
_clients_lock = threading.Lock()


def get_client(config: ClusterConfig | None = None) -> KubeClient:
    """The cached client for ``config`` (default: :func:`from_django_settings`).

    Cached per process; call it inside the task (after a Celery prefork), not at import.
    """
    config = config or from_django_settings()
    with _clients_lock:
        if config not in _clients:
            _clients[config] = KubeClient(config)
        return _clients[config]


def reset_clients() -> None:
    """Close and forget every cached client (tests, settings changes)."""
    with _clients_lock:
        for cached in _clients.values():
            cached.close()
        _clients.clear()
