"""The simulated kubelet's image pulls (``kubesim.sim.kubelet``'s docstring says what a
pod whose image cannot be pulled goes through; ``kubesim.sim.images`` holds the runtime's
words): ErrImagePull with the kubelet's events, the back-off (10 s doubling to 300 s, as
pkg/kubelet/images/image_manager.go and kuberuntime_container.go), ImagePullBackOff, and
InvalidImageName for a reference the kubelet cannot parse."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesim.sim.images import INVALID_NAME, pull_error
from kubesim.sim.state import PodInfo
from kubesim.sim.util import ann_float

if TYPE_CHECKING:
    from kubesim.sim.kubelet import Kubelet, PodRun

IMAGE_PULL_BACKOFF_SECONDS, IMAGE_PULL_BACKOFF_MAX = 10.0, 300.0


def pull(k: Kubelet, info: PodInfo, run: PodRun, now: float, host: str) -> bool:
    """Pull the image before the container starts; True when the pull failed (the
    pod stays Pending, ErrImagePull, and a retry is scheduled after the back-off)."""
    pod = info.obj
    error = pull_error(pod)
    if error is None:
        return False
    limit = ann_float(pod, "image-pull-failures") or 0.0
    if limit > 0 and run.pull_failures >= limit:
        return False  # the registry answers again: this pull succeeds
    ref = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("image") or ""
    c = k._main(pod)
    if error == INVALID_NAME.format(ref=ref):
        return _invalid_name(k, info, run, now, host, error)
    if k.kubelet_events:
        for etype, reason, message in (
            ("Normal", "Pulling", f'Pulling image "{ref}"'),
            ("Warning", "Failed", f'Failed to pull image "{ref}": {error}'),
            ("Warning", "Failed", "Error: ErrImagePull"),
        ):
            k.events.record(pod, etype, reason, message, component="kubelet",
                            host=host, kind="Pod", field_path=f"spec.containers{{{c}}}")
    backoff = min(IMAGE_PULL_BACKOFF_MAX,
                  IMAGE_PULL_BACKOFF_SECONDS * (2 ** run.pull_failures))
    run.pull_failures += 1
    _write_pull_waiting(k, info, run, now, "ErrImagePull", error)
    run.gen += 1
    # The pod worker syncs again at once and finds the image in back-off.
    k._at(now + 1.0, info.key, run.gen, "pull_backoff")
    k._at(now + backoff, info.key, run.gen, "start")
    return True


def _invalid_name(k: Kubelet, info: PodInfo, run: PodRun, now: float, host: str,
                  message: str) -> bool:
    """A reference the kubelet cannot parse: InvalidImageName, nothing pulled; the pod
    worker tries again on its next sync (here after the back-off), with no BackOff."""
    pod, c = info.obj, k._main(info.obj)
    if k.kubelet_events:
        for etype, reason, text in (("Warning", "InspectFailed", message),
                                    ("Warning", "Failed", "Error: InvalidImageName")):
            k.events.record(pod, etype, reason, text, component="kubelet", host=host,
                            kind="Pod", field_path=f"spec.containers{{{c}}}")
    run.pull_failures += 1
    _write_pull_waiting(k, info, run, now, "InvalidImageName", message)
    run.gen += 1
    k._at(now + min(IMAGE_PULL_BACKOFF_MAX, IMAGE_PULL_BACKOFF_SECONDS
                    * (2 ** (run.pull_failures - 1))), info.key, run.gen, "start")
    return True


def back_off(k: Kubelet, info: PodInfo, run: PodRun, now: float) -> None:
    pod = info.obj
    ref = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("image") or ""
    message = f'Back-off pulling image "{ref}"'
    c = k._main(pod)
    if k.kubelet_events:
        for etype, reason, text in (("Normal", "BackOff", message),
                                    ("Warning", "Failed", "Error: ImagePullBackOff")):
            k.events.record(pod, etype, reason, text, component="kubelet",
                            host=pod["spec"].get("nodeName"), kind="Pod",
                            field_path=f"spec.containers{{{c}}}")
    _write_pull_waiting(k, info, run, now, "ImagePullBackOff", message)


def _write_pull_waiting(k: Kubelet, info: PodInfo, run: PodRun, now: float, reason: str,
                        message: str) -> None:
    st = k._base_status(info, run, now, ready=False, reason="ContainersNotReady")
    st["conditions"][0]["status"] = "True"  # the sandbox is up; only the image is missing
    waiting = {"waiting": {"reason": reason, "message": message}}
    statuses = k._container_statuses(info, run, waiting, False, main_state=waiting)
    for cs in statuses:  # nothing was pulled or created yet
        cs["imageID"] = ""
        cs.pop("containerID", None)
    st["containerStatuses"] = statuses
    k._patch_status(info, st)
