"""An image that cannot be pulled: Pending, ErrImagePull then ImagePullBackOff with the
kubelet's events and back-off, as a real kubelet; deleting such a pod removes it at once."""

from __future__ import annotations

import pytest
from kubernetes.client import ApiClient

from kubesim.sim.harness import SimHarness, condition, make_pod

NS = "team-a"


@pytest.fixture
def h():
    h = SimHarness("small", seed=5)
    h.namespace(NS)
    return h


def _waiting(pod):
    return pod["status"]["containerStatuses"][0]["state"]["waiting"]


def test_a_missing_image_waits_err_image_pull_then_back_off_and_retries(h):
    h.store.create("pods", make_pod("p", gpus=1, grace=300, image="team/trainer:9",
                                    annotations={"image-pull": "not-found"}), namespace=NS)
    h.advance(3)  # bound, startup, first pull fails
    pod = h.pod(NS, "p")
    assert pod["status"]["phase"] == "Pending" and pod["spec"]["nodeName"]
    assert _waiting(pod)["reason"] == "ErrImagePull"
    assert "not found" in _waiting(pod)["message"]
    assert condition(pod, "Ready")["status"] == "False"
    ApiClient()._ApiClient__deserialize(pod, "V1Pod")  # schema-complete for the client
    h.advance(2)
    pod = h.pod(NS, "p")
    assert _waiting(pod) == {"reason": "ImagePullBackOff",
                             "message": 'Back-off pulling image "team/trainer:9"'}
    ApiClient()._ApiClient__deserialize(pod, "V1Pod")
    events = [(e["type"], e["reason"], e["message"]) for e in h.events(NS)
              if e["involvedObject"]["name"] == "p"]
    reasons = [r for _, r, _ in events]
    assert "Started" not in reasons and "Pulling" in reasons and "BackOff" in reasons
    assert any(m.startswith('Failed to pull image "team/trainer:9": rpc error')
               for _, r, m in events if r == "Failed")
    assert ("Warning", "Failed", "Error: ErrImagePull") in events
    assert ("Warning", "Failed", "Error: ImagePullBackOff") in events
    pulls = sum(e.get("count", 1) for e in h.events(NS)
                if e["involvedObject"]["name"] == "p" and e["reason"] == "Pulling")
    h.advance(120)  # retries after 10, 20, 40, 80 s
    later = sum(e.get("count", 1) for e in h.events(NS)
                if e["involvedObject"]["name"] == "p" and e["reason"] == "Pulling")
    assert 3 <= later - pulls <= 5
    assert h.pod(NS, "p")["status"]["phase"] == "Pending"

    h.store.delete("pods", "p", namespace=NS)  # no container ran: gone at once, not in 300 s
    h.advance(2)
    assert [p for p in h.store.list("pods", namespace=NS) if p["metadata"]["name"] == "p"] == []


def test_a_registry_that_does_not_resolve_fails_the_pull_and_a_good_image_runs(h):
    h.store.create("pods", make_pod("bad", image="registry.invalid/ml/x:1"), namespace=NS)
    h.store.create("pods", make_pod("good", image="registry.example.org/ml/x:1"), namespace=NS)
    h.advance(5)
    assert _waiting(h.pod(NS, "bad"))["reason"] == "ImagePullBackOff"
    failed = [e["message"] for e in h.events(NS)
              if e["involvedObject"]["name"] == "bad" and e["reason"] == "Failed"]
    assert any("lookup registry.invalid: no such host" in m for m in failed)
    assert h.pod(NS, "good")["status"]["phase"] == "Running"


@pytest.mark.parametrize(("kind", "words"), [
    ("timeout", "dial tcp 10.0.0.1:443: i/o timeout"),
    ("unavailable", "503 Service Unavailable"),
    ("toomanyrequests", "429 Too Many Requests - Server message: toomanyrequests"),
    ("unauthorized", "pull access denied"),
])
def test_each_kind_of_pull_failure_has_containerds_words(h, kind, words):
    h.store.create("pods", make_pod("p", gpus=1, image="registry.example.org/team/trainer:9",
                                    annotations={"image-pull": kind}), namespace=NS)
    h.advance(3)
    waiting = _waiting(h.pod(NS, "p"))
    assert waiting["reason"] == "ErrImagePull"
    assert waiting["message"].startswith(
        'rpc error: code = Unknown desc = failed to pull and unpack image '
        '"registry.example.org/team/trainer:9": ')
    assert words in waiting["message"]


def test_a_registry_host_that_does_not_resolve_and_a_missing_image():
    from kubesim.sim.images import pull_error

    def pod(image, **ann):
        return make_pod("p", gpus=0, image=image, annotations=ann)

    assert pull_error(pod("registry.invalid/team/trainer:2.4")) == (
        'rpc error: code = Unknown desc = failed to pull and unpack image '
        '"registry.invalid/team/trainer:2.4": failed to resolve reference '
        '"registry.invalid/team/trainer:2.4": failed to do request: Head '
        '"https://registry.invalid/v2/team/trainer/manifests/2.4": dial tcp: lookup '
        'registry.invalid: no such host')
    assert pull_error(pod("team/trainer:9", **{"image-pull": "not-found"})) == (
        'rpc error: code = NotFound desc = failed to pull and unpack image "team/trainer:9": '
        'failed to resolve reference "team/trainer:9": team/trainer:9: not found')
    assert pull_error(pod("registry.example.org/team/trainer:9")) is None


def test_an_invalid_name_waits_invalid_image_name_and_a_flaky_registry_recovers(h):
    h.store.create("pods", make_pod("bad", gpus=1, image="team/trainer:9",
                                    annotations={"image-pull": "invalid"}), namespace=NS)
    h.store.create("pods", make_pod("flaky", gpus=1, image="team/trainer:9", annotations={
        "image-pull": "unavailable", "image-pull-failures": "2", "run-seconds": "600"}),
        namespace=NS)
    h.advance(3)
    bad = h.pod(NS, "bad")
    assert _waiting(bad) == {"reason": "InvalidImageName", "message": (
        'Failed to apply default image tag "team/trainer:9": couldn\'t parse image name '
        '"team/trainer:9": invalid reference format')}
    ApiClient()._ApiClient__deserialize(bad, "V1Pod")
    events = [(e["reason"], e["message"]) for e in h.events(NS)
              if e["involvedObject"]["name"] == "bad"]
    assert ("Failed", "Error: InvalidImageName") in events
    assert any(r == "InspectFailed" for r, _ in events)
    assert not any(r in ("Pulling", "BackOff") for r, _ in events)  # nothing is pulled
    assert _waiting(h.pod(NS, "flaky"))["reason"] == "ErrImagePull"
    h.advance(60)  # the third pull succeeds (after 10 s and 20 s of back-off)
    assert h.pod(NS, "flaky")["status"]["phase"] == "Running"
    assert h.pod(NS, "bad")["status"]["phase"] == "Pending"
