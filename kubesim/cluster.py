"""Cluster: a Store, the simulation and the HTTP server in one embeddable object."""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from aiohttp import web

from . import persistence
from .clock import Clock
from .faults import Faults
from .server import Server
from .store import Store

if TYPE_CHECKING:
    from .sim import Simulation

log = logging.getLogger("kubesim")
_T = TypeVar("_T")


def _load_simulation():
    try:
        from kubesim.sim import Simulation, load_profile
    except ImportError as e:  # the simulation package is optional
        log.warning("simulation unavailable: %s", e)
        return None, None
    return Simulation, load_profile


class Cluster:
    def __init__(self, *, profile: str | Path | dict | None = "default", speed: float = 1.0,
                 deterministic: bool = False, simulate: bool = True,
                 state_file: Path | None = None, seed: int = 0, tick_seconds: float = 0.1,
                 save_interval: float = 30.0, bookmark_interval: float = 60.0,
                 access_log: bool = False, watch_cache_size: int | None = None):
        """watch_cache_size: events kept per resource (None: sized as the API server's
        watch cache, kubesim/watchcache.py); a small one makes resumes expire (410)."""
        self.access_log = access_log
        self.clock = Clock(speed=speed, deterministic=deterministic)
        self.store = Store(self.clock, seed=seed, watch_cache_size=watch_cache_size)
        self.faults = Faults()
        self.state_file = Path(state_file) if state_file else None
        self.seed = seed
        self.tick_seconds = tick_seconds
        self.save_interval = save_interval
        self.bookmark_interval = bookmark_interval
        self.profile: dict | None = None
        self.sim: Simulation | None = None
        self.url: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task] = []
        if self.state_file is not None and persistence.load(self.store, self.state_file):
            log.info("loaded state from %s (resourceVersion %s)", self.state_file,
                     self.store.resource_version)
        if simulate and profile is not None:
            Simulation, load_profile = _load_simulation()
            if Simulation is not None:
                self.profile = profile if isinstance(profile, dict) else load_profile(profile)
                self.sim = Simulation(self.store, profile=self.profile, seed=seed)
                self.sim.bootstrap()

    # ---- threads ------------------------------------------------------------------------------
    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        if self._thread is not None:
            assert self.url is not None  # set before start() returned the first time
            return self.url
        ready: Future = Future()
        self._thread = threading.Thread(target=self._run, args=(host, port, ready),
                                        name="kubesim", daemon=True)
        self._thread.start()
        try:
            self.url = ready.result(timeout=30)
        except BaseException:
            self._thread.join(timeout=5)
            self._thread = self._loop = None
            raise
        return self.url

    def _run(self, host: str, port: int, ready: Future) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self.server = Server(self)
            self._runner = web.AppRunner(self.server.app, access_log=logging.getLogger(
                                             "kubesim.access") if self.access_log else None,
                                         handler_cancellation=True, shutdown_timeout=1.0)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, host, port, reuse_address=True)
            loop.run_until_complete(site.start())
            real_port = site.port   # the bound port (port 0 picks a free one)
            if self.sim is not None and not self.clock.deterministic:
                self._tasks.append(loop.create_task(self._tick_loop()))
            if self.state_file is not None:
                self._tasks.append(loop.create_task(self._save_loop()))
            ready.set_result(f"http://{host}:{real_port}")
        except BaseException as e:
            ready.set_exception(e)
            if self._runner is not None:
                loop.run_until_complete(self._runner.cleanup())
            loop.close()
            return
        loop.run_forever()
        for t in self._tasks:
            t.cancel()
        loop.run_until_complete(self._runner.cleanup())
        loop.close()

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.tick_seconds)
            try:
                assert self.sim is not None  # the loop is only started with a simulation
                self.sim.tick()
            except Exception:
                log.exception("simulation tick failed")

    async def _save_loop(self) -> None:
        while True:
            await asyncio.sleep(self.save_interval)
            try:
                self.save()
            except Exception:
                log.exception("saving state failed")

    def stop(self) -> None:
        if self._thread is None:
            return
        if self.state_file is not None:
            try:
                self.call(self.save)
            except Exception:
                log.exception("saving state on stop failed")
        assert self._loop is not None  # start() sets it before it returns
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread = None
        self._loop = None
        if self.sim is not None and hasattr(self.sim, "close"):
            self.sim.close()

    def __enter__(self) -> Cluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Run fn on the loop thread (where the store lives) and return its result."""
        if self._loop is None or threading.current_thread() is self._thread:
            return fn(*args, **kwargs)
        fut: Future[_T] = Future()

        def run() -> None:
            try:
                fut.set_result(fn(*args, **kwargs))
            except BaseException as e:
                fut.set_exception(e)
        self._loop.call_soon_threadsafe(run)
        return fut.result(timeout=60)

    def advance(self, seconds: float, step: float = 1.0) -> None:
        """Move the clock forward step by step, running one simulation tick after each step."""
        if seconds < 0 or step <= 0:
            raise ValueError("seconds must be >= 0 and step > 0")

        def run():
            left = seconds
            while left > 1e-9:
                d = min(step, left)
                self.clock.advance(d)
                left -= d
                if self.sim is not None:
                    self.sim.tick()
        self.call(run)

    def tick(self) -> None:
        if self.sim is not None:
            self.call(self.sim.tick)

    def save(self) -> None:
        if self.state_file is None:
            raise RuntimeError("no state file configured")
        t = time.perf_counter()
        persistence.save(self.store, self.state_file)
        log.debug("saved state in %.3fs", time.perf_counter() - t)

    def write_kubeconfig(self, path) -> Path:
        if self.url is None:
            raise RuntimeError("start() the cluster first")
        return write_kubeconfig(path, self.url)


def write_kubeconfig(path, url: str, name: str = "kubesim") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cfg = {"apiVersion": "v1", "kind": "Config", "preferences": {},
           "clusters": [{"name": name, "cluster": {"server": url}}],
           "users": [{"name": name, "user": {}}],
           "contexts": [{"name": name, "context": {"cluster": name, "user": name,
                                                    "namespace": "default"}}],
           "current-context": name}
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path
