"""Watch streams: ADDED/MODIFIED/DELETED/BOOKMARK/ERROR events as JSON lines."""
from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from aiohttp import web

from .errors import ApiError, bad_request, too_large_resource_version
from .jsonutil import dumps
from .tables import table, wants_table

if TYPE_CHECKING:
    from .resources import ResourceType
    from .server import Server

DEFAULT_TIMEOUT = 1800
#: how often (seconds) an idle watch checks whether it was told to drop
DROP_POLL = 0.5


#: events written per write (one chunk) when several are waiting
BATCH = 512


def _line(etype: str, obj: dict) -> bytes:
    return dumps({"type": etype, "object": obj}) + b"\n"


_SHARED: dict[tuple[int, str], tuple[dict, bytes]] = {}
_SHARED_SIZE = 1024


def _shared_line(etype: str, obj: dict) -> bytes:
    """_line of a stored object, serialised once for every watcher of the event: stored
    objects are never mutated, and the entry keeps the object (so its id is not reused)."""
    key = (id(obj), etype)
    hit = _SHARED.get(key)
    if hit is not None and hit[0] is obj:
        return hit[1]
    data = _line(etype, obj)
    if len(_SHARED) >= _SHARED_SIZE:
        del _SHARED[next(iter(_SHARED))]
    _SHARED[key] = (obj, data)
    return data


def _table_line(etype: str, obj: dict, rt, store, include) -> bytes:
    return _line(etype, table(rt, [obj], store.clock.now(), obj["metadata"]["resourceVersion"],
                              include))


INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def _bookmark(rt: ResourceType, rv: int, initial_end: bool = False) -> bytes:
    """A BOOKMARK carries an object of the watched kind with only metadata.resourceVersion
    (cacher/cache_watcher.go); the one that ends the initial events of a
    sendInitialEvents watch is annotated k8s.io/initial-events-end: "true"
    (metav1.InitialEventsAnnotationKey; docs: api-concepts/#streaming-lists)."""
    meta: dict = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    return _line("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta})


def _as_of(old: dict, rv: int) -> dict:
    """The previous object with the event's resourceVersion, as the DELETED event of an
    object that left a selector carries it (cache_watcher.go convertToWatchEvent)."""
    return {**old, "metadata": {**old["metadata"], "resourceVersion": str(rv)}}


async def serve_watch(server: Server, request: web.Request, rt: ResourceType, ns: str | None,
                      label_selector: str | None, field_selector: str | None,
                      convert=None, shown_as: ResourceType | None = None):
    """convert/shown_as: serve another representation of rt's objects (events.k8s.io).

    resourceVersion as in docs api-concepts/#semantics-for-watch: unset or "0" start with
    the current state as ADDED events, "X" resumes after X from the resource's event history
    (kubesim/watchcache.py; older than it: 200 and one ERROR event, 410 Expired). With
    sendInitialEvents=true (resourceVersionMatch=NotOlderThan, validated by the server) the
    state comes first, then, when allowWatchBookmarks=true, a BOOKMARK annotated
    k8s.io/initial-events-end. An event is filtered on the object before and after it
    (cache_watcher.go convertToWatchEvent): entering the selector is ADDED, leaving it is
    DELETED with the previous object, so a watcher never keeps an object it cannot see."""
    store = server.store
    q = request.query
    pred = store.matcher(rt, label_selector, field_selector)
    try:
        timeout = float(q.get("timeoutSeconds") or DEFAULT_TIMEOUT)
    except ValueError:
        raise bad_request("invalid timeoutSeconds") from None
    bookmarks = q.get("allowWatchBookmarks", "false") in ("1", "true", "True")
    rv_param = q.get("resourceVersion") or ""
    try:
        since = int(rv_param) if rv_param not in ("", "0") else None
    except ValueError:
        raise bad_request(f"invalid resource version: {rv_param!r}") from None
    send_param = q.get("sendInitialEvents")
    send_initial = since is None if send_param is None else send_param in ("1", "true", "True")
    initial_end = send_param is not None and send_initial and bookmarks
    if send_param is not None:
        since = None if send_initial else since
    if convert is not None:
        def line(etype: str, obj: dict) -> bytes:
            return _line(etype, convert(obj))
    elif wants_table(request.headers.get("Accept", "")):
        include = q.get("includeObject")

        def line(etype: str, obj: dict) -> bytes:
            return _table_line(etype, obj, rt, store, include)
    else:
        line = _shared_line
    backlog: list = []
    error: ApiError | None = None
    if rv_param not in ("", "0") and int(rv_param) > store.resource_version:
        # the watch cache waits for a version it has not seen, then gives up with this
        # (cacher.go Watch -> waitUntilFreshAndBlock, as an ERROR event); kubesim never lags
        error = too_large_resource_version(int(rv_param), store.resource_version)
    elif since is not None:
        try:
            backlog = store.events_since(rt, since)
        except ApiError as e:
            error = e
        if ns:
            backlog = [e for e in backlog if e[3] == ns]

    queue: asyncio.Queue = asyncio.Queue()

    def on_event(entry):
        if entry[2] is not rt or (ns and entry[3] != ns):
            return
        queue.put_nowait(entry)

    unsubscribe = store.subscribe_events(on_event)
    # everything below until the first await runs atomically on the loop thread
    initial = []
    start_rv = store.resource_version
    if error is None and send_initial:
        initial = [o for o in store.select(rt, ns, None, None) if pred is None or pred(o)]

    def translate(entry) -> tuple[str, dict] | None:
        rv, etype, _, _, obj, old = entry
        if pred is None:
            return etype, obj
        now_match = etype != "DELETED" and pred(obj)
        was = old is not None and pred(old)
        if now_match:
            return ("MODIFIED" if was else "ADDED"), obj
        if was:
            return "DELETED", (obj if etype == "DELETED" else _as_of(old, rv))
        return None

    faults = server.cluster.faults
    epoch = faults.watch_epoch
    faults.watches_open += 1
    shown = shown_as or rt
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json",
                                                   "Transfer-Encoding": "chunked"})
    try:
        await resp.prepare(request)
        if error is not None:
            await resp.write(_line("ERROR", error.status()))
            return resp
        for i in range(0, len(initial), BATCH):
            await resp.write(b"".join(line("ADDED", obj) for obj in initial[i:i + BATCH]))
        if initial_end:
            await resp.write(_bookmark(shown, start_rv, initial_end=True))
        for i in range(0, len(backlog), BATCH):
            lines = [line(*t) for t in map(translate, backlog[i:i + BATCH]) if t]
            if lines:
                await resp.write(b"".join(lines))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        interval = server.cluster.bookmark_interval
        next_bookmark = loop.time() + interval
        while True:
            now = loop.time()
            if now >= deadline:
                break
            if faults.watch_epoch != epoch:   # POST /kubesim/watches/drop
                faults.watches_dropped += 1
                if request.transport is not None:
                    request.transport.abort()
                return resp
            wait = min(deadline - now, DROP_POLL)
            if bookmarks:
                wait = min(wait, max(0.0, next_bookmark - now))
            try:
                entry = await asyncio.wait_for(queue.get(), wait)
            except TimeoutError:
                if bookmarks and loop.time() >= next_bookmark:
                    # the queue is empty, so every event up to the store's version was sent
                    next_bookmark = loop.time() + interval
                    await resp.write(_bookmark(shown, store.resource_version))
                continue
            # the events already waiting go out in one chunk (one write, one send)
            entries = [entry]
            while len(entries) < BATCH and not queue.empty():
                entries.append(queue.get_nowait())
            lines = [line(*t) for t in map(translate, entries) if t]
            if lines:
                await resp.write(b"".join(lines))
        with contextlib.suppress(ConnectionError, RuntimeError):
            await resp.write_eof()
    except ConnectionError:
        pass
    finally:
        faults.watches_open -= 1
        unsubscribe()
    return resp
