"""Watch streams: ADDED/MODIFIED/DELETED/BOOKMARK/ERROR events as JSON lines."""
from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from aiohttp import web

from .errors import ApiError, bad_request
from .jsonutil import dumps
from .tables import table, wants_table

if TYPE_CHECKING:
    from .resources import ResourceType
    from .server import Server

DEFAULT_TIMEOUT = 1800
#: how often (seconds) an idle watch checks whether it was told to drop
DROP_POLL = 0.5


def _line(etype: str, obj: dict) -> bytes:
    return dumps({"type": etype, "object": obj}) + b"\n"


def _table_line(etype: str, obj: dict, rt, store, include) -> bytes:
    return _line(etype, table(rt, [obj], store.clock.now(), obj["metadata"]["resourceVersion"],
                              include))


async def serve_watch(server: Server, request: web.Request, rt: ResourceType, ns: str | None,
                      label_selector: str | None, field_selector: str | None,
                      convert=None, shown_as: ResourceType | None = None):
    """convert/shown_as: serve another representation of rt's objects (events.k8s.io)."""
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
    send_initial = since is None
    if convert is not None:
        def line(etype: str, obj: dict) -> bytes:
            return _line(etype, convert(obj))
    elif wants_table(request.headers.get("Accept", "")):
        include = q.get("includeObject")

        def line(etype: str, obj: dict) -> bytes:
            return _table_line(etype, obj, rt, store, include)
    else:
        line = _line
    backlog: list[tuple[str, dict]] = []
    error: ApiError | None = None
    if since is not None:
        try:
            history = store.events_since(since)
        except ApiError as e:
            error = e
            history = []
        backlog = [(et, obj) for _, et, ert, ens, obj in history
                   if ert is rt and (not ns or ens == ns)]

    queue: asyncio.Queue = asyncio.Queue()

    def on_event(etype, ert, obj):
        if ert is not rt:
            return
        if ns and obj["metadata"].get("namespace") != ns:
            return
        queue.put_nowait((etype, obj))

    unsubscribe = store.subscribe_raw(on_event)
    # everything below until the first await runs atomically on the loop thread
    matched: set = set()

    def key(obj):
        m = obj["metadata"]
        return (m.get("namespace"), m["name"])

    initial = []
    if error is None:
        if send_initial:
            initial = [("ADDED", o) for o in store.select(rt, ns, None, None) if
                       pred is None or pred(o)]
            matched = {key(o) for _, o in initial}
        elif pred is not None:
            current = {key(o): o for o in store.select(rt, ns, None, None)}
            # objects present at `since` that matched: approximate with those matching now
            matched = {k for k, o in current.items() if pred(o)}
            for et, obj in backlog:
                if et != "ADDED" and pred(obj):
                    matched.add(key(obj))

    def translate(etype: str, obj: dict) -> str | None:
        if pred is None:
            return etype
        k = key(obj)
        now_match = etype != "DELETED" and pred(obj)
        was = k in matched
        if etype == "DELETED":
            matched.discard(k)
            return "DELETED" if was or pred(obj) else None
        if now_match and not was:
            matched.add(k)
            return "ADDED"
        if now_match:
            return etype
        if was:
            matched.discard(k)
            return "DELETED"
        return None

    faults = server.cluster.faults
    epoch = faults.watch_epoch
    faults.watches_open += 1
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json",
                                                   "Transfer-Encoding": "chunked"})
    try:
        await resp.prepare(request)
        if error is not None:
            await resp.write(_line("ERROR", error.status()))
            return resp
        for et, obj in initial:
            await resp.write(line(et, obj))
        for et, obj in backlog:
            t = translate(et, obj) if pred is not None else et
            if t:
                await resp.write(line(t, obj))
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
                et, obj = await asyncio.wait_for(queue.get(), wait)
            except TimeoutError:
                if bookmarks and loop.time() >= next_bookmark:
                    next_bookmark = loop.time() + interval
                    shown = shown_as or rt
                    await resp.write(_line("BOOKMARK", {
                        "kind": shown.kind, "apiVersion": shown.api_version,
                        "metadata": {"resourceVersion": str(store.resource_version)}}))
                continue
            t = translate(et, obj)
            if t:
                await resp.write(line(t, obj))
        with contextlib.suppress(ConnectionError, RuntimeError):
            await resp.write_eof()
    except ConnectionError:
        pass
    finally:
        faults.watches_open -= 1
        unsubscribe()
    return resp
