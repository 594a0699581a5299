"""Server-side apply and managedFields (FieldsV1).

A field set is a set of paths; a path is a tuple of FieldsV1 keys: ``f:<name>`` for a map
key, ``k:{"name":"x"}`` for an item of an associative list (merge keys as in patch.py).
Leaves are owned; an associative-list item is owned as a member (FieldsV1 ``"."``).
"""
from __future__ import annotations

import copy
import json
from functools import lru_cache

from .errors import ApiError
from .patch import MERGE_KEYS, SERVICE_PORT_KEY

TRACKED_META = ("labels", "annotations", "finalizers", "ownerReferences")
SKIP_TOP = {"apiVersion", "kind", "metadata", "status"}


def _list_key(name: str, parent: tuple) -> str | None:
    if name == "ports" and parent[-1:] == ("f:spec",) and not any(
            p.startswith("k:") for p in parent):
        return SERVICE_PORT_KEY
    key = MERGE_KEYS.get(name)
    return key if key not in (None, "$set") else None


def _item_key(key: str, item: dict) -> str:
    return "k:" + json.dumps({key: item.get(key)}, separators=(",", ":"))


def _walk(value, path: tuple, out: set, parent_name: str = "") -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _walk(v, (*path, f"f:{k}"), out, k)
        return
    if isinstance(value, list) and value and parent_name:
        key = _list_key(parent_name, path[:-1])
        if key and all(isinstance(x, dict) and key in x for x in value):
            for item in value:
                ip = (*path, _item_key(key, item))
                out.add(ip)
                for k, v in item.items():
                    _walk(v, (*ip, f"f:{k}"), out, k)
            return
    out.add(path)


def field_set(obj: dict) -> set:
    """The paths an object (or an applied configuration) sets, minus server-owned ones."""
    out: set = set()
    meta = obj.get("metadata") or {}
    for k in TRACKED_META:
        if k in meta:
            _walk(meta[k], ("f:metadata", f"f:{k}"), out, k)
    for k, v in obj.items():
        if k not in SKIP_TOP:
            _walk(v, (f"f:{k}",), out, k)
    return out


def changed_fields(old: dict, new: dict) -> set:
    """Paths whose value differs between old and new (set in new): the paths of
    field_set(new) where value_at(old, p) != value_at(new, p), found without visiting the
    subtrees equal in both."""
    out: set = set()
    meta = new.get("metadata") or {}
    path: tuple[str, ...]
    for k in TRACKED_META:
        if k in meta:
            path = ("f:metadata", f"f:{k}")
            _changed(value_at(old, path), value_at(new, path), meta[k], path, out, k)
    for k, v in new.items():
        if k not in SKIP_TOP:
            path = (f"f:{k}",)
            _changed(value_at(old, path), value_at(new, path), v, path, out, k)
    return out


def _changed(o, n, v, path: tuple, out: set, parent_name: str) -> None:
    """_walk(v, path, ...) keeping the paths whose values differ; o and n are value_at(old,
    path) and value_at(new, path) (n is v unless a duplicate list key led elsewhere). Below
    equal values every path has equal values, so an equal subtree is skipped whole."""
    if o == n:
        return
    if isinstance(v, dict) and v:
        for k, x in v.items():
            part = f"f:{k}"
            _changed(_step(o, part), _step(n, part), x, (*path, part), out, k)
        return
    if isinstance(v, list) and v and parent_name:
        key = _list_key(parent_name, path[:-1])
        if key and all(isinstance(x, dict) and key in x for x in v):
            for item in v:
                part = _item_key(key, item)
                ip = (*path, part)
                oi, ni = _step(o, part), _step(n, part)
                if oi != ni:
                    out.add(ip)
                for k, x in item.items():
                    sub = f"f:{k}"
                    _changed(_step(oi, sub), _step(ni, sub), x, (*ip, sub), out, k)
            return
    out.add(path)  # a leaf whose value differs (equal ones returned above)


_MISSING = object()


@lru_cache(maxsize=4096)
def _item_of(part: str) -> tuple:
    """The (merge key, value) of a ``k:{...}`` path element."""
    (k, v), = json.loads(part[2:]).items()
    return k, v


def _step(cur, p: str):
    if p.startswith("f:"):
        if not isinstance(cur, dict) or p[2:] not in cur:
            return _MISSING
        return cur[p[2:]]
    if p.startswith("k:"):
        k, v = _item_of(p)
        if not isinstance(cur, list):
            return _MISSING
        return next((x for x in cur if isinstance(x, dict) and x.get(k) == v), _MISSING)
    return cur


def value_at(obj, path: tuple):
    cur = obj
    for p in path:
        cur = _step(cur, p)
        if cur is _MISSING:
            return cur
    return cur


def to_fields_v1(paths: set) -> dict:
    root: dict = {}
    for p in sorted(paths):
        node = root
        for part in p:
            node = node.setdefault(part, {})
        if p and p[-1].startswith("k:"):
            node["."] = {}
    return root


def from_fields_v1(fields: dict, prefix: tuple = ()) -> set:
    out: set = set()
    for k, v in (fields or {}).items():
        if k == ".":
            out.add(prefix)
            continue
        p = (*prefix, k)
        if not v:
            out.add(p)
        else:
            out |= from_fields_v1(v, p)
    return out


def format_path(path: tuple) -> str:
    s = ""
    for p in path:
        if p.startswith("f:"):
            s += "." + p[2:]
        elif p.startswith("k:"):
            (k, v), = json.loads(p[2:]).items()
            s += f"[{k}={json.dumps(v)}]"
    return s


def _remove(obj, path: tuple) -> None:
    parent = value_at(obj, path[:-1]) if len(path) > 1 else obj
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(parent, list):
        (k, v), = json.loads(last[2:]).items()
        parent[:] = [x for x in parent if not (isinstance(x, dict) and x.get(k) == v)]


def apply_merge(live, cfg, name: str = "", path: tuple = ()):
    if isinstance(cfg, dict):
        out = dict(live) if isinstance(live, dict) else {}
        for k, v in cfg.items():
            out[k] = apply_merge(out.get(k), v, k, (*path, f"f:{k}"))
        return out
    if isinstance(cfg, list) and name:
        key = _list_key(name, path[:-1])
        if key and isinstance(live, list) and all(isinstance(x, dict) and key in x for x in cfg):
            items = [copy.deepcopy(x) for x in live]
            for item in cfg:
                idx = next((i for i, x in enumerate(items) if isinstance(x, dict)
                            and x.get(key) == item[key]), None)
                if idx is None:
                    items.append(copy.deepcopy(item))
                else:
                    items[idx] = apply_merge(items[idx], item, "", path)
            return items
    return copy.deepcopy(cfg)


def managers(obj: dict) -> list[dict]:
    return list((obj.get("metadata") or {}).get("managedFields") or [])


def print_manager(e: dict) -> str:
    """How a conflict names a manager (managedfields/internal/conflict.go printManager):
    an applier by name, an updater with its apiVersion (the manager identifier never holds
    a time, so no "at <time>"), either with its subresource."""
    out = json.dumps(e.get("manager", ""))
    if e.get("subresource"):
        out += f" with subresource {json.dumps(e['subresource'])}"
    if e.get("operation") == "Update":
        out += f" using {e.get('apiVersion', '')}"
    return out


def conflict_error(conflicts: list[tuple[dict, tuple]]) -> ApiError:
    """409 as NewConflictError (managedfields/internal/conflict.go): one conflict inline,
    several grouped by manager (sorted by the manager identifier, whose JSON starts with the
    name and then the operation), each path on its own "- " line."""
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {print_manager(e)}",
               "field": format_path(p)} for e, p in conflicts]
    if len(conflicts) == 1:
        e, p = conflicts[0]
        msg = f"Apply failed with 1 conflict: conflict with {print_manager(e)}: {format_path(p)}"
    else:
        groups: dict[tuple, list] = {}
        for e, p in conflicts:
            groups.setdefault((e.get("manager", ""), e.get("operation", ""),
                               e.get("apiVersion", ""), e.get("subresource", ""), ), []
                              ).append((e, p))
        lines = []
        for k in sorted(groups):
            lines.append(f"conflicts with {print_manager(groups[k][0][0])}:")
            lines += [f"- {format_path(p)}" for _, p in groups[k]]
        msg = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", msg, {"causes": causes})


def server_side_apply(live: dict | None, cfg: dict, *, manager: str, force: bool,
                      api_version: str, now: str, subresource: str | None = None) -> dict:
    """Returns the merged object with managedFields updated; raises 409 on conflicts.
    An apply to /status owns status fields only, in an entry with subresource "status"
    (managers are told apart by name, operation and subresource, as fieldmanager's
    manager identifier does)."""
    live = live or {}
    new_fields = _status_fields(cfg) if subresource else field_set(cfg)
    entries = managers(live)
    mine_old: set = set()
    others = []
    for e in entries:
        fs = from_fields_v1(e.get("fieldsV1") or {})
        if e.get("manager") == manager and e.get("operation") == "Apply" \
                and (e.get("subresource") or None) == subresource:
            mine_old = fs
        else:
            others.append((e, fs))
    conflicts = []
    for e, fs in others:
        for p in sorted(new_fields & fs):
            if value_at(live, p) != value_at(cfg, p):
                conflicts.append((e, p))
    if conflicts and not force:
        raise conflict_error(conflicts)
    result = apply_merge(live, cfg)
    meta = result.setdefault("metadata", {})
    owned_by_others: set = set()
    new_entries = []
    for e, fs in others:
        fs = fs - new_fields
        owned_by_others |= fs
        if fs:
            new_entries.append({**e, "fieldsV1": to_fields_v1(fs)})
    # a path the manager applied before (say an empty map) that holds what it applies now
    # stays: only what it no longer applies at all is removed
    holders = {q[:i] for q in new_fields for i in range(1, len(q))}
    for p in sorted(mine_old - new_fields - owned_by_others - holders, key=len):
        if not any(p[:i] in new_fields for i in range(1, len(p))):
            _remove(result, p)
            for i in range(len(p) - 1, 0, -1):  # drop maps the removal left empty
                if value_at(result, p[:i]) == {} and p[:i] not in owned_by_others:
                    _remove(result, p[:i])
    if new_fields:
        entry = {"manager": manager, "operation": "Apply", "apiVersion": api_version,
                 "time": now, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(new_fields)}
        if subresource:
            entry["subresource"] = subresource
        new_entries.append(entry)
    meta["managedFields"] = sorted(new_entries, key=_entry_order)
    return result


def _entry_order(e: dict):
    return (e.get("operation") != "Apply", e.get("manager", ""))


def _tree(value, path: tuple, parent_name: str):
    """The FieldsV1 subtree of one value, built directly (keys in the order to_fields_v1
    gives them); the same as to_fields_v1(field_set(...)) restricted to this value."""
    if isinstance(value, dict) and value:
        return {f"f:{k}": _tree(value[k], (*path, f"f:{k}"), k) for k in sorted(value)}
    if isinstance(value, list) and value and parent_name:
        key = _list_key(parent_name, path[:-1])
        if key and all(isinstance(x, dict) and key in x for x in value):
            node: dict = {}
            for ik, item in sorted(((_item_key(key, it), it) for it in value),
                                   key=lambda t: t[0]):
                sub = node.setdefault(ik, {".": {}})
                for k in item:
                    ip = (*path, ik, f"f:{k}")
                    sub[f"f:{k}"] = _merge(sub.get(f"f:{k}"), _tree(item[k], ip, k))
                node[ik] = {".": {}, **{k: sub[k] for k in sorted(sub) if k != "."}}
            return node
    return {}


def _merge(a: dict | None, b: dict) -> dict:
    if not a:
        return b
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out.get(k), v)
    return {k: out[k] for k in sorted(out)}


def fields_v1_of(obj: dict) -> dict:
    """to_fields_v1(field_set(obj)) in one pass (the create path)."""
    top: dict = {}
    meta = obj.get("metadata") or {}
    mfields = {f"f:{k}": _tree(meta[k], ("f:metadata", f"f:{k}"), k)
               for k in sorted(TRACKED_META) if k in meta}
    if mfields:
        top["f:metadata"] = mfields
    for k in obj:
        if k not in SKIP_TOP:
            top[f"f:{k}"] = _tree(obj[k], (f"f:{k}",), k)
    return {k: top[k] for k in sorted(top)}


def record_update(old: dict | None, new: dict, *, manager: str, api_version: str,
                  now: str, subresource: str | None = None) -> None:
    """Assign the fields a non-apply write changed to `manager` (operation Update)."""
    if old is None and not subresource:   # a create: every field set is the manager's
        fields = fields_v1_of(new)
        new.setdefault("metadata", {})["managedFields"] = [
            {"manager": manager, "operation": "Update", "apiVersion": api_version,
             "time": now, "fieldsType": "FieldsV1", "fieldsV1": fields}] if fields else []
        return
    if subresource:
        changed: set = set()
        if "status" in new:
            path = ("f:status",)
            _changed(value_at(old or {}, path), value_at(new, path), new["status"], path,
                     changed, "status")
    else:
        changed = field_set(new) if old is None else changed_fields(old, new)
    entries = managers(old) if old is not None else []
    out, mine = [], set()
    for e in entries:
        fs = from_fields_v1(e.get("fieldsV1") or {})
        same = e.get("manager") == manager and e.get("operation") == "Update" \
            and e.get("subresource") == subresource
        if same:
            mine = fs
            continue
        if bool(e.get("subresource")) == bool(subresource):
            fs = fs - changed
        if not subresource:   # fields the write removed are no longer owned by anyone
            fs = {p for p in fs if value_at(new, p) is not _MISSING}
        if fs:
            out.append({**e, "fieldsV1": to_fields_v1(fs)})
    mine = {p for p in (mine | changed) if value_at(new, p) is not _MISSING}
    if mine:
        entry = {"manager": manager, "operation": "Update", "apiVersion": api_version,
                 "time": now, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(mine)}
        if subresource:
            entry["subresource"] = subresource
        out.append(entry)
    new.setdefault("metadata", {})["managedFields"] = sorted(out, key=_entry_order)


def _status_fields(obj: dict) -> set:
    out: set = set()
    if "status" in obj:
        _walk(obj["status"], ("f:status",), out, "status")
    return out
