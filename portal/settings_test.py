"""Settings for the test suite: production settings plus the few test-only overrides.

Postgres and Redis are used when DATABASE_URL / REDIS_URL point to them (CI sets both);
otherwise SQLite and a local-memory cache.
"""

import os

os.environ.setdefault("SECRET_KEY", "test-secret-key-for-the-trainyard-test-suite-only-0123456789")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")
os.environ.setdefault("SECURE_SSL_REDIRECT", "false")
os.environ.setdefault("STATIC_MANIFEST", "false")


def _worker_redis_url(url: str, worker: str) -> str:
    """Under pytest-xdist each worker (``PYTEST_XDIST_WORKER`` gw0, gw1, ...) gets its own
    Redis database: the one in ``url`` plus 1 + the worker's number (gw0 -> db 1 for
    ``redis://host:6379/0``), so one worker's ``cache.clear()`` (a FLUSHDB) never empties
    another worker's cache. Redis has 16 databases: the number wraps around past 15."""
    if not url or not worker.startswith("gw") or not worker[2:].isdigit():
        return url
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    base = parts.path.strip("/")
    db = (int(base) if base.isdigit() else 0) + 1 + int(worker[2:])
    return urlunsplit(parts._replace(path=f"/{db % 16}"))


if os.environ.get("REDIS_URL") and os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["REDIS_URL"] = _worker_redis_url(os.environ["REDIS_URL"],
                                                os.environ["PYTEST_XDIST_WORKER"])

from portal.settings import *  # noqa: E402, F403
from portal.settings import REDIS_URL  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed only
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
CELERY_TASK_ALWAYS_EAGER = True
# Every admission pass explains the queue, so a test reads positions right after any pass
# (jobs/tests/test_explain_cadence.py tests the cadence itself).
TRAINYARD_EXPLAIN_SECONDS = 0.0
# ... and reads the jobs' history afresh (jobs/tests/test_explain_cadence.py tests the wait).
TRAINYARD_HISTORY_SECONDS = 0.0
CELERY_BROKER_URL = "memory://"
CELERY_BROKER_TRANSPORT = None
SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
if not REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
