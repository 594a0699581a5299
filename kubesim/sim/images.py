"""What the container runtime says when the kubelet cannot pull a pod's image.

The words are containerd's (``failed to pull and unpack image``, ``failed to resolve
reference``; a missing reference is gRPC ``NotFound``, everything else ``Unknown``) as
the kubelet receives them over the CRI and writes them into the container's waiting
message and the ``Failed`` event (pkg/kubelet/images/image_manager.go: "Failed to pull
image %q: %v"); a reference the kubelet cannot parse never reaches the runtime
(``Failed to apply default image tag ...``, reason ``InvalidImageName``).
"""

from __future__ import annotations

from kubesim.sim.util import ann

PULL_ERRORS = {
    # containerd's words for a missing image and for a registry refusing the pull
    "not-found": "rpc error: code = NotFound desc = failed to pull and unpack image "
    '"{ref}": failed to resolve reference "{ref}": {ref}: not found',
    "unauthorized": "rpc error: code = Unknown desc = failed to pull and unpack image "
    '"{ref}": failed to resolve reference "{ref}": pull access denied, repository does '
    "not exist or may require authorization: authorization failed: no basic auth "
    "credentials",
    "no-such-host": "rpc error: code = Unknown desc = failed to pull and unpack image "
    '"{ref}": failed to resolve reference "{ref}": failed to do request: Head '
    '"https://{host}/v2/{path}/manifests/{tag}": dial tcp: lookup {host}: no such host',
    # transient: a registry that does not answer, answers 503, or rate-limits (429)
    "timeout": "rpc error: code = Unknown desc = failed to pull and unpack image "
    '"{ref}": failed to resolve reference "{ref}": failed to do request: Head '
    '"https://{host}/v2/{path}/manifests/{tag}": dial tcp 10.0.0.1:443: i/o timeout',
    "unavailable": "rpc error: code = Unknown desc = failed to pull and unpack image "
    '"{ref}": failed to resolve reference "{ref}": unexpected status from HEAD request to '
    "https://{host}/v2/{path}/manifests/{tag}: 503 Service Unavailable",
    "toomanyrequests": "rpc error: code = Unknown desc = failed to pull and unpack image "
    '"{ref}": failed to copy: httpReadSeeker: failed open: unexpected status code '
    "https://{host}/v2/{path}/manifests/{tag}: 429 Too Many Requests - Server message: "
    "toomanyrequests: You have reached your pull rate limit. You may increase the limit by "
    "authenticating and upgrading: https://www.docker.com/increase-rate-limit",
}
#: pkg/kubelet/images/image_manager.go: a reference that does not parse (no pull).
INVALID_NAME = ('Failed to apply default image tag "{ref}": couldn\'t parse image name '
                '"{ref}": invalid reference format')


def pull_error(pod: dict) -> str | None:
    """The runtime's error pulling the pod's main image, or None when it pulls: from the
    annotation ``kubesim.trainyard.io/image-pull`` (a key of :data:`PULL_ERRORS`, or
    ``invalid``), or a registry host under ``.invalid`` (RFC 2606: never resolves)."""
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    ref = containers[0].get("image") or ""
    kind = (ann(pod, "image-pull") or "").strip().lower()
    first, _, rest = ref.partition("/")
    host = first if rest and ("." in first or ":" in first) else ""
    if not kind and host.split(":")[0].endswith(".invalid"):
        kind = "no-such-host"
    if not kind or kind in ("ok", "always", "false"):
        return None
    if kind == "invalid":
        return INVALID_NAME.format(ref=ref)
    name, _, tag = (rest or ref).partition("@")[0].rpartition(":")
    if not name or "/" in tag:
        name, tag = (rest or ref).partition("@")[0], "latest"
    return PULL_ERRORS.get(kind, PULL_ERRORS["not-found"]).format(
        ref=ref, host=host or "registry-1.docker.io", path=name, tag=tag)
