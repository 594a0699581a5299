"""Fault injection through Cluster.faults and POST /kubesim/faults."""
from __future__ import annotations

import json
import time

import pytest
import urllib3

from .helpers import api_error, core, ns, own, request

pytestmark = pytest.mark.timeout(30)


def test_status_fault_for_n_requests(kubesim):
    c = core(kubesim)
    ns(kubesim)
    rule = kubesim.faults.add(method="GET", path_regex=r"/namespaces/team-a/configmaps",
                              status=500, times=2)
    for _ in range(2):
        status, body = api_error(c.list_namespaced_config_map, "team-a")
        assert status == 500 and body["reason"] == "InternalError"
    assert own(c.list_namespaced_config_map("team-a").items) == []
    assert rule.hits == 2
    # other methods and paths were never affected
    c.create_namespaced_config_map("team-a", {"metadata": {"name": "x"}})


def test_429_has_retry_after(kubesim):
    kubesim.faults.add(path_regex="/api/v1/namespaces$", status=429, retry_after=3)
    status, headers, body = request(kubesim, "GET", "/api/v1/namespaces")
    assert status == 429 and headers["Retry-After"] == "3"
    assert json.loads(body)["reason"] == "TooManyRequests"
    kubesim.faults.clear()
    assert request(kubesim, "GET", "/api/v1/namespaces")[0] == 200


def test_conflict_fault_on_writes_only(kubesim):
    c = core(kubesim)
    ns(kubesim)
    kubesim.faults.add(method="PATCH", path_regex="configmaps/x", status=409, times=1)
    c.create_namespaced_config_map("team-a", {"metadata": {"name": "x"}})
    assert api_error(c.patch_namespaced_config_map, "x", "team-a", {"data": {"a": "b"}})[0] \
        == 409
    assert c.patch_namespaced_config_map("x", "team-a", {"data": {"a": "b"}}).data == {"a": "b"}


def test_delay_and_timeout(kubesim):
    c = core(kubesim)
    kubesim.faults.add(method="GET", path_regex="/api/v1/nodes", delay=0.3, times=1)
    t = time.monotonic()
    c.list_node()
    assert time.monotonic() - t >= 0.3
    hold = kubesim.faults.add(method="GET", path_regex="/api/v1/nodes", timeout=True)
    t = time.monotonic()
    with pytest.raises(urllib3.exceptions.HTTPError):   # read timeout (after the retries)
        c.list_node(_request_timeout=0.3)
    assert time.monotonic() - t < 5 and hold.hits >= 1
    kubesim.faults.remove(hold)
    assert c.list_node().items


def test_http_fault_endpoint(kubesim):
    status, _, body = request(kubesim, "POST", "/kubesim/faults",
                              {"method": "GET", "path_regex": "/api/v1/nodes", "status": 503,
                               "times": 1})
    assert status == 201 and json.loads(body)["status"] == 503
    assert request(kubesim, "GET", "/api/v1/nodes")[0] == 503
    assert request(kubesim, "GET", "/api/v1/nodes")[0] == 200
    assert request(kubesim, "POST", "/kubesim/faults", {"path_regex": "("})[0] == 400
    request(kubesim, "POST", "/kubesim/faults", {"path_regex": "x", "status": 500})
    listed = json.loads(request(kubesim, "GET", "/kubesim/faults")[2])
    assert len(listed["rules"]) == 1
    assert listed["faulted"] == 1 and listed["requests"] >= 2
    request(kubesim, "DELETE", "/kubesim/faults")
    assert kubesim.faults.rules() == []


def test_http_clock_and_advance(kubesim):
    status, _, body = request(kubesim, "GET", "/kubesim/clock")
    before = json.loads(body)
    assert status == 200 and before["deterministic"] is True
    status, _, body = request(kubesim, "POST", "/kubesim/advance", {"seconds": 90, "step": 30})
    after = json.loads(body)
    from kubesim.clock import parse_rfc3339
    assert (parse_rfc3339(after["now"]) - parse_rfc3339(before["now"])).total_seconds() == 90
    assert request(kubesim, "POST", "/kubesim/advance", {"seconds": -1})[0] == 400


def test_drop_watches_hangs_up_open_watches(kubesim):
    ns(kubesim)
    resp = kubesim.api_client.rest_client.pool_manager.request(
        "GET", kubesim.url + "/api/v1/namespaces/team-a/configmaps?watch=true",
        preload_content=False, timeout=10, retries=False)
    deadline = time.monotonic() + 5
    while kubesim.faults.watches_open < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    status, _, body = request(kubesim, "POST", "/kubesim/watches/drop")
    assert status == 200 and json.loads(body)["dropped"] == 1
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.HTTPError):
        for _ in resp.stream(1024):
            pass
    assert time.monotonic() - started < 3   # dropped, not ended by its timeout
    assert kubesim.faults.watches_dropped == 1 and kubesim.faults.watches_open == 0
    # a new watch works as before
    core(kubesim).create_namespaced_config_map("team-a", {"metadata": {"name": "after"}})
