"""Settings for the test suite: production settings plus the few test-only overrides.

Postgres and Redis are used when DATABASE_URL / REDIS_URL point to them (CI sets both);
otherwise SQLite and a local-memory cache.
"""

import os

os.environ.setdefault("SECRET_KEY", "test-secret-key-for-the-trainyard-test-suite-only-0123456789")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")
os.environ.setdefault("SECURE_SSL_REDIRECT", "false")
os.environ.setdefault("STATIC_MANIFEST", "false")

from portal.settings import *  # noqa: F403
from portal.settings import REDIS_URL

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed only
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
CELERY_TASK_ALWAYS_EAGER = True
CELERY_BROKER_URL = "memory://"
CELERY_BROKER_TRANSPORT = None
SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
if not REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
