"""Safe errors in `make run`'s mode: the portal's own 404/500 pages, tracebacks to the log.

Issue 16: `make run` ran with DEBUG, so a 404 listed every URL pattern (and a 500 would
have shown settings). The launcher now runs with TRAINYARD_LOCAL=true and DEBUG off
(`test_settings.test_the_embedded_default_needs_no_server` checks the settings it gets);
these are the pages a browser sees then.
"""

import logging

import pytest
from django.urls import path

import portal.urls


def boom(request):
    raise RuntimeError("kaboom-the-probe-traceback")


urlpatterns = [path("boom/", boom), *portal.urls.urlpatterns]

LEAKS = ["urlpatterns", "URLconf", "Traceback", "kaboom", "SECRET_KEY", "INSTALLED_APPS",
         "Django settings", "api/v1", "admin/"]


@pytest.mark.urls("portal.tests.test_safe_errors")
@pytest.mark.django_db
def test_404_and_500_show_the_portals_pages_and_the_traceback_goes_to_the_log(
        client, settings, caplog):
    settings.DEBUG = False
    client.raise_request_exception = False
    missing = client.get("/no-such-page/")
    with caplog.at_level(logging.ERROR, logger="django.request"):
        failed = client.get("/boom/")

    assert missing.status_code == 404 and "Not found" in missing.content.decode()
    assert failed.status_code == 500 and "Something went wrong" in failed.content.decode()
    for response in (missing, failed):
        body = response.content.decode()
        assert [word for word in LEAKS if word in body] == []
    # The traceback is not lost: django.request logs it, and LOGGING prints it.
    logged = [r for r in caplog.records if r.name == "django.request" and r.exc_info]
    assert logged and "kaboom-the-probe-traceback" in str(logged[0].exc_info[1])
