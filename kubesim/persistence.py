"""Save and load the store to a JSON state file (atomic write)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .jsonutil import dumps, loads
from .store import CRD_KEY, Store

FORMAT = 1


def dump(store: Store) -> dict:
    return {"format": FORMAT, "resourceVersion": store.resource_version,
            "time": store.clock.timestamp(),
            "objects": {key: [o for bucket in buckets.values() for o in bucket.values()]
                        for key, buckets in store._data.items() if any(buckets.values())}}


def save(store: Store, path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dumps(dump(store))
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(store: Store, path: Path) -> bool:
    """Replace the store's content with the file's; False when there is no file."""
    path = Path(path)
    if not path.exists():
        return False
    data = loads(path.read_bytes())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: unknown state format {data.get('format')!r}")
    objects = data.get("objects") or {}
    store._data = {}
    for crd in objects.get(CRD_KEY, []):
        store.registry.register_crd(crd)
    for key, objs in objects.items():
        rt = store.registry.find(key)
        if rt is None:
            continue
        for obj in objs:
            ns = obj["metadata"].get("namespace", "") if rt.namespaced else ""
            store._data.setdefault(rt.key, {}).setdefault(ns, {})[obj["metadata"]["name"]] = obj
    store._rv = max(store._rv, int(data.get("resourceVersion") or 0))
    store._base_rv = store._rv
    store._caches = {}
    store._sorted = {}
    store._owned = None          # the GC's owner index is rebuilt on demand
    store._rng.seed(store._rv)   # a new uid/name stream, not the one that made these objects
    return True
