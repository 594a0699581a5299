"""JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge patch."""
from __future__ import annotations

import copy

from .errors import ApiError


def _err(msg: str, code: int = 422) -> ApiError:
    return ApiError(code, "Invalid" if code == 422 else "BadRequest", msg)


# ---- JSON patch ------------------------------------------------------------------------------
def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _err(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc, parts: list[str], path: str):
    cur = doc
    for p in parts:
        if isinstance(cur, dict):
            if p not in cur:
                raise _err(f"the server rejected our request due to an error in our request: "
                           f"doc is missing path: {path!r}")
            cur = cur[p]
        elif isinstance(cur, list):
            try:
                cur = cur[int(p)]
            except (ValueError, IndexError):
                raise _err(f"doc is missing path: {path!r}") from None
        else:
            raise _err(f"doc is missing path: {path!r}")
    return cur


def _list_index(container: list, key: str, path: str, adding: bool) -> int:
    if key == "-" and adding:
        return len(container)
    try:
        i = int(key)
    except ValueError:
        raise _err(f"invalid array index {key!r} in {path!r}") from None
    if i < 0 or i > len(container) or (not adding and i == len(container)):
        raise _err(f"array index out of bounds: {path!r}")
    return i


def json_patch(doc: dict, ops) -> dict:
    if not isinstance(ops, list):
        raise _err("json patch body must be a list of operations", 400)
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise _err(f"invalid JSON patch operation {op!r}", 400)
        kind, path = op["op"], op["path"]
        parts = _pointer(path)
        if kind in ("add", "replace", "test") and "value" not in op:
            raise _err(f"missing value for {kind} operation", 400)
        if kind == "copy" or kind == "move":
            src = _pointer(op.get("from", ""))
            value = copy.deepcopy(_walk(doc, src, op.get("from", "")))
            if kind == "move":
                _remove(doc, src, op["from"])
            doc = _add(doc, parts, value, path)
        elif kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op["value"]), path)
        elif kind == "remove":
            _remove(doc, parts, path)
        elif kind == "replace":
            _walk(doc, parts, path)
            if not parts:
                doc = copy.deepcopy(op["value"])
            else:
                parent = _walk(doc, parts[:-1], path)
                if isinstance(parent, list):
                    parent[_list_index(parent, parts[-1], path, False)] = copy.deepcopy(
                        op["value"])
                else:
                    parent[parts[-1]] = copy.deepcopy(op["value"])
        elif kind == "test":
            if _walk(doc, parts, path) != op["value"]:
                raise _err(f"testing value {path} failed")
        else:
            raise _err(f"Unexpected kind: {kind}", 400)
    return doc


def _add(doc, parts, value, path):
    if not parts:
        return value
    parent = _walk(doc, parts[:-1], path)
    key = parts[-1]
    if isinstance(parent, list):
        parent.insert(_list_index(parent, key, path, True), value)
    elif isinstance(parent, dict):
        parent[key] = value
    else:
        raise _err(f"doc is missing path: {path!r}")
    return doc


def _remove(doc, parts, path):
    if not parts:
        raise _err("cannot remove the root", 400)
    parent = _walk(doc, parts[:-1], path)
    key = parts[-1]
    if isinstance(parent, list):
        del parent[_list_index(parent, key, path, False)]
    elif isinstance(parent, dict) and key in parent:
        del parent[key]
    else:
        raise _err(f"Unable to remove nonexistent key: {key}: missing value")


# ---- merge patch -----------------------------------------------------------------------------
def merge_patch(doc, patch, copy_patch: bool = True):
    """RFC 7386. The result shares what the patch does not touch with `doc`; with
    copy_patch=False it also shares the patch's values (a caller that copies the result)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch) if copy_patch else patch
    out = dict(doc) if isinstance(doc, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v, copy_patch)
    return out


# ---- strategic merge patch -------------------------------------------------------------------
# merge keys by field name, as in the Go struct tags (patchMergeKey) of the kinds we serve.
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "env": "name", "ports": "containerPort", "volumes": "name", "volumeMounts": "mountPath",
    "volumeDevices": "devicePath", "conditions": "type", "ownerReferences": "uid",
    "imagePullSecrets": "name", "hostAliases": "ip", "topologySpreadConstraints": "topologyKey",
    "taints": "key", "addresses": "type", "resourceClaims": "name", "readinessGates": None,
    "finalizers": "$set", "args": None, "command": None, "tolerations": None,
    "subsets": None, "rules": None, "subjects": None, "images": None,
}
# Service ports use "port" as their merge key.
SERVICE_PORT_KEY = "port"


def _merge_key(name: str, parent_path: tuple) -> str | None:
    if name == "ports" and parent_path[-1:] == ("spec",) and "containers" not in parent_path:
        return SERVICE_PORT_KEY
    return MERGE_KEYS.get(name)


def strategic_merge(doc, patch, path: tuple = ()):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    out = dict(doc) if isinstance(doc, dict) else {}
    retain = patch.get("$retainKeys")
    for k, v in patch.items():
        if k in ("$patch", "$retainKeys"):
            continue
        if k.startswith("$setElementOrder/"):
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            out[field] = [x for x in out.get(field) or [] if x not in (v or [])]
            continue
        if v is None:
            out.pop(k, None)
            continue
        cur = out.get(k)
        if isinstance(v, dict):
            merged = strategic_merge(cur, v, (*path, k))
            if merged is None:
                out.pop(k, None)
            else:
                out[k] = merged
        elif isinstance(v, list):
            out[k] = _merge_list(cur, v, _merge_key(k, path), (*path, k))
        else:
            out[k] = v
    if retain is not None:
        out = {k: v for k, v in out.items() if k in retain}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/"):
            field = k.split("/", 1)[1]
            key = _merge_key(field, path)
            if isinstance(out.get(field), list) and key and key != "$set":
                order = [x.get(key) if isinstance(x, dict) else x for x in v]
                out[field] = sorted(out[field], key=lambda x: order.index(x.get(key))
                                    if x.get(key) in order else len(order))
    return out


def _merge_list(cur, patch: list, key: str | None, path: tuple):
    if key is None or not isinstance(cur, list):
        if key == "$set" and isinstance(cur, list):
            pass
        else:
            return [strip_directives(x) for x in patch if not _is_delete(x)]
    if key == "$set":
        out = list(cur)
        for x in patch:
            if x not in out:
                out.append(x)
        return out
    if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in patch):
        return [strip_directives(x) for x in patch
                if not (isinstance(x, dict) and x.get("$patch") == "replace")]
    out = [copy.deepcopy(x) for x in cur]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            if not _is_delete(item):
                out.append(copy.deepcopy(item))
            continue
        idx = next((i for i, x in enumerate(out) if isinstance(x, dict)
                    and x.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
            continue
        if idx is None:
            out.append(strip_directives(item))
        else:
            out[idx] = strategic_merge(out[idx], item, path)
    return out


def _is_delete(x) -> bool:
    return isinstance(x, dict) and x.get("$patch") == "delete"


def strip_directives(x):
    if isinstance(x, dict):
        return {k: strip_directives(v) for k, v in x.items()
                if not k.startswith("$") and v is not None}
    if isinstance(x, list):
        return [strip_directives(v) for v in x]
    return x
