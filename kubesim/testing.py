"""pytest plugin: a fresh kubesim cluster per test in milliseconds.

Register it with ``pytest_plugins = ["kubesim.testing"]`` in the root conftest.py.

Fixtures
--------
``kubesim``          a :class:`KubesimHandle` (``.url``, ``.api_client``, ``.kubeconfig``,
                     ``.cluster``, ``.store``, ``.faults``, ``.advance()``, ``.call()``).
                     One server per option set and session; its store is reset to the
                     bootstrapped state (nodes, storage classes, the PyTorchJob CRD) and its
                     faults cleared before every test. Deterministic clock, simulation on with
                     the ``small`` profile. Options per test::

                         @pytest.mark.kubesim(simulate=False)
                         @pytest.mark.kubesim(profile="default", seed=3)

``kubesim_factory``  ``kubesim_factory(**Cluster_kwargs)`` starts a private cluster (stopped at
                     teardown), e.g. for persistence tests.
"""
from __future__ import annotations

import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .cluster import Cluster

DEFAULT_OPTIONS = {"profile": "small", "deterministic": True, "simulate": True, "seed": 0}
DEFAULT_TIMEOUT = 10.0


def make_api_client(url: str, timeout: float | None = DEFAULT_TIMEOUT):
    """An official-client ApiClient for `url` whose requests time out after `timeout` s
    unless the call passes its own ``_request_timeout``."""
    import kubernetes  # deferred: the plugin loads in every pytest run; the client only here

    cfg = kubernetes.client.Configuration()
    cfg.host = url
    api = kubernetes.client.ApiClient(cfg)
    if timeout:
        original = api.rest_client.request

        def request(*args, _request_timeout=None, **kwargs):
            return original(*args, _request_timeout=_request_timeout or timeout, **kwargs)
        api.rest_client.request = request  # type: ignore[method-assign]  # deliberate: default timeout
    return api


@dataclass
class KubesimHandle:
    cluster: Cluster
    url: str
    kubeconfig: Path
    api_client: object

    @property
    def store(self):
        return self.cluster.store

    @property
    def faults(self):
        return self.cluster.faults

    @property
    def sim(self):
        return self.cluster.sim

    def advance(self, seconds: float, step: float = 1.0) -> None:
        self.cluster.advance(seconds, step)

    def call(self, fn, *args, **kwargs):
        return self.cluster.call(fn, *args, **kwargs)


class _Pool:
    """Started clusters keyed by options, each with its bootstrap snapshot."""

    def __init__(self, tmpdir: Path):
        self.tmpdir = tmpdir
        self.clusters: dict[tuple, KubesimHandle] = {}

    def get(self, options: dict) -> KubesimHandle:
        key = tuple(sorted(options.items()))
        handle = self.clusters.get(key)
        if handle is None:
            try:
                cluster = Cluster(**options)
            except (FileNotFoundError, KeyError) as e:   # e.g. the profile is missing
                warnings.warn(f"kubesim: {e}; running this cluster without simulation",
                              stacklevel=2)
                cluster = Cluster(**{**options, "simulate": False})
            url = cluster.start()
            kc = cluster.write_kubeconfig(self.tmpdir / f"kubeconfig-{len(self.clusters)}")
            cluster.call(cluster.store.snapshot)
            handle = KubesimHandle(cluster, url, kc, make_api_client(url))
            self.clusters[key] = handle
        else:
            reset(handle.cluster)
        return handle

    def close(self) -> None:
        for h in self.clusters.values():
            h.cluster.stop()
        self.clusters.clear()


def reset(cluster: Cluster) -> None:
    """Back to the bootstrapped state: store snapshot, a fresh simulation, no faults."""
    cluster.faults.clear()

    def run():
        cluster.store.reset()
        if cluster.sim is not None:
            sim_cls = type(cluster.sim)
            if hasattr(cluster.sim, "close"):
                cluster.sim.close()
            cluster.sim = sim_cls(cluster.store, profile=cluster.profile, seed=cluster.seed)
            cluster.sim.bootstrap()
    cluster.call(run)


def pytest_configure(config):
    config.addinivalue_line("markers", "kubesim(**options): options for the kubesim fixture "
                                       "(Cluster keyword arguments)")


@pytest.fixture(scope="session")
def _kubesim_pool():
    with tempfile.TemporaryDirectory(prefix="kubesim-") as d:
        pool = _Pool(Path(d))
        yield pool
        pool.close()


@pytest.fixture
def kubesim(request, _kubesim_pool) -> KubesimHandle:
    options = dict(DEFAULT_OPTIONS)
    marker = request.node.get_closest_marker("kubesim")
    if marker is not None:
        options.update(marker.kwargs)
    return _kubesim_pool.get(options)


@pytest.fixture
def kubesim_factory(tmp_path: Path) -> Iterator[Callable[..., KubesimHandle]]:
    started: list[Cluster] = []

    def make(**kwargs) -> KubesimHandle:
        opts = {**DEFAULT_OPTIONS, **kwargs}
        cluster = Cluster(**opts)
        url = cluster.start()
        started.append(cluster)
        kc = cluster.write_kubeconfig(tmp_path / f"kubeconfig-{len(started)}")
        return KubesimHandle(cluster, url, kc, make_api_client(url))
    yield make
    for c in started:
        c.stop()
