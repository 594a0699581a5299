"""Trainyard settings: one module, everything from the environment.

Two ways to run (see docs/architecture.md, "Two ways to run"):

* embedded default (``make run``): ``TRAINYARD_LOCAL=true`` (the launcher sets it); SQLite
  file, a broker that needs no server (kombu's filesystem transport, made safe to share in
  ``portal/broker.py``), the embedded kubesim cluster;
* production: ``DEBUG=false``, ``SECRET_KEY``, ``ALLOWED_HOSTS``, ``DATABASE_URL``
  (Postgres), ``CELERY_BROKER_URL`` and ``REDIS_URL`` (Redis), ``TRAINYARD_CLUSTER_MODE``.

The README lists every variable.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

from portal.env import env_bool, env_float, env_int, env_list, env_secret, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
# Runtime data of the embedded default (SQLite file, broker folders, kubesim state).
VAR_DIR = Path(env_str("TRAINYARD_VAR_DIR", str(BASE_DIR / "var")))

# DEBUG is Django's: error pages with tracebacks, settings and the URL list in the browser.
# Only for a developer at their own machine; `make run` leaves it off (tracebacks go to the
# console through LOGGING either way).
DEBUG = env_bool("DEBUG", False)
# LOCAL: a plain-HTTP install on this machine (`make run` sets TRAINYARD_LOCAL=true):
# the development key, localhost in ALLOWED_HOSTS, cookies without Secure, no HTTPS
# redirect or HSTS, static files from the source folders. DEBUG implies it.
LOCAL = env_bool("TRAINYARD_LOCAL", False) or DEBUG

_INSECURE_DEV_KEY = "django-insecure-trainyard-embedded-development-key-not-for-production"
SECRET_KEY = env_secret("SECRET_KEY") or ""
if not SECRET_KEY:
    if not LOCAL and env_bool("TRAINYARD_REQUIRE_SECRET_KEY", True):
        raise ImproperlyConfigured(
            "SECRET_KEY must be set (or SECRET_KEY_FILE), or run with TRAINYARD_LOCAL=true "
            "(as make run does) for a local install"
        )
    SECRET_KEY = _INSECURE_DEV_KEY

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"] if LOCAL else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
SITE_URL = env_str("SITE_URL", "http://127.0.0.1:8000")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "csp",
    "core",
    "portal",
    "tenants",
    "jobs",
    "billing",
    "k8s_sync",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "portal.middleware.TimeZoneMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "portal.middleware.NulRefusedMiddleware",
    "portal.middleware.PageMethodsMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "portal.middleware.PrivateAnswersMiddleware",
    # last, as django-axes asks: it turns a locked-out login into the lockout answer
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.context_processors.navigation",
            ],
        },
    },
]

# --- Database: Postgres from DATABASE_URL, else the embedded SQLite file ---------------
_DATABASE_URL = env_str("DATABASE_URL")
if _DATABASE_URL:
    DATABASES = {
        "default": dj_database_url.parse(
            _DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0),
            conn_health_checks=True,
        )
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / "trainyard.sqlite3"),
            # Web, worker and beat share the file: wait for locks instead of failing.
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache: Redis when REDIS_URL is set (shared by web and workers), else a file cache --
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": REDIS_URL, "KEY_PREFIX": "trainyard"}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                          "LOCATION": str(VAR_DIR / "cache")}}

# --- Auth ----------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    # django-axes first: it refuses a locked-out username or address before the password
    # is checked, and counts failures.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Login throttling (django-axes): after AXES_FAILURE_LIMIT wrong passwords for one
# username from one address, that pair is locked out for AXES_COOLOFF_MINUTES; a good
# password does not unlock it early. Failures are kept in the database (AccessAttempt).
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_float("AXES_COOLOFF_MINUTES", 15.0, minimum=0.1) / 60.0  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_IPWARE_PROXY_COUNT = env_int("AXES_PROXY_COUNT", 0, minimum=0)
AXES_VERBOSE = False
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# --- Security: secure by default, relaxed only by LOCAL or explicit variables ---------
_SECURE = not LOCAL
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", _SECURE)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", _SECURE)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", _SECURE)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if _SECURE else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", _SECURE)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", _SECURE)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp): every asset is local, so pages load scripts,
# styles, fonts and images from this origin only. Plotly sets style attributes on the
# charts it draws, hence 'unsafe-inline' for styles (never for scripts).
_SELF = "'self'"
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [_SELF],
        "script-src": [_SELF],
        "style-src": [_SELF, "'unsafe-inline'"],
        "img-src": [_SELF, "data:", "blob:"],
        "font-src": [_SELF, "data:"],
        "connect-src": [_SELF],
        "worker-src": [_SELF, "blob:"],
        "object-src": ["'none'"],
        "base-uri": [_SELF],
        "form-action": [_SELF],
        "frame-ancestors": ["'none'"],
    },
}
if env_bool("USE_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Internationalisation: English and Simplified Chinese -----------------------------
LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

# --- Static files: everything served locally (no CDN), WhiteNoise in production -------
STATIC_URL = "/static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
# plotly.js is static/vendor/plotly/plotly-trainyard.min.js: a partial bundle (only the
# trace types portal/charts.py draws) of the version the pinned plotly package ships,
# rebuilt by scripts/build-plotly-bundle.sh.
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
]
# STATIC_MANIFEST (default: on unless local; `make run` turns it on): `collectstatic` writes
# hashed names with .gz and .br beside them, and WhiteNoise serves them compressed with a
# one-year cache header. Off: files straight from the finders, uncompressed.
STATIC_MANIFEST = env_bool("STATIC_MANIFEST", not LOCAL)
STATIC_BROTLI_QUALITY = min(env_int("STATIC_BROTLI_QUALITY", 11, minimum=0), 11)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "portal.staticfiles.CompressedStaticFilesStorage"
        if STATIC_MANIFEST
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = LOCAL and not STATIC_MANIFEST

# --- E-mail ---------------------------------------------------------------------------
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD", "") or ""
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Trainyard <trainyard@localhost>")

# --- REST API ---------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: its WWW-Authenticate header makes anonymous requests a 401, not 403.
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "core.api.Pagination",
    "DEFAULT_METADATA_CLASS": "core.api.Metadata",
    # JSON (nested too deeply: a 400, not a RecursionError), forms and multipart as usual
    "DEFAULT_PARSER_CLASSES": ["core.api.JSONParser", "rest_framework.parsers.FormParser",
                               "rest_framework.parsers.MultiPartParser"],
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "core.exceptions.api_exception_handler",
    "DEFAULT_THROTTLE_RATES": {"user": "2000/hour", "anon": "60/hour"},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Trainyard API",
    "DESCRIPTION": "Self-service portal for a shared Kubernetes GPU training cluster.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {"PoolKindEnum": "core.choices.PoolKind",
                            "JobKindEnum": "jobs.choices.JobKind"},
}

# --- Celery: Redis in production; a server-less filesystem broker when unset ----------
# (docs/architecture.md, "The embedded broker").
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or "filesystem://localhost//"
CELERY_BROKER_TRANSPORT: str | None = None
if CELERY_BROKER_URL.startswith("filesystem://"):
    # kombu's transport with atomic writes and a reader that skips an unreadable message.
    CELERY_BROKER_TRANSPORT = "portal.broker:Transport"
    _BROKER_DIR = VAR_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS: dict = {
        "data_folder_in": str(_BROKER_DIR / "out"),
        "data_folder_out": str(_BROKER_DIR / "out"),
        "processed_folder": str(_BROKER_DIR / "processed"),
        "control_folder": str(_BROKER_DIR / "control"),
        "tmp_folder": str(_BROKER_DIR / "tmp"),
        "rejected_folder": str(_BROKER_DIR / "rejected"),
        "store_processed": False,
    }
else:
    # Longer than the longest task time limit, so acks_late redelivery never duplicates
    # a task that is still running.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_TIME_LIMIT = 600
CELERY_TASK_SOFT_TIME_LIMIT = 540
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# --- The cluster Trainyard drives ------------------------------------------------------
# mode "embedded": the kubesim cluster that `make run` starts (kubeconfig written under
# var/); "kubeconfig": $KUBECONFIG (+ context); "in-cluster": the pod's service account.
_CLUSTER_MODE = env_str("TRAINYARD_CLUSTER_MODE", "embedded")
if _CLUSTER_MODE not in {"embedded", "kubeconfig", "in-cluster"}:
    raise ImproperlyConfigured(
        f"TRAINYARD_CLUSTER_MODE must be embedded, kubeconfig or in-cluster, not {_CLUSTER_MODE!r}"
    )
TRAINYARD_CLUSTER = {
    "mode": "kubeconfig" if _CLUSTER_MODE == "embedded" else _CLUSTER_MODE,
    "embedded": _CLUSTER_MODE == "embedded",
    "kubeconfig": env_str("KUBECONFIG", str(VAR_DIR / "kubesim" / "kubeconfig"))
    if _CLUSTER_MODE != "in-cluster" else "",
    "context": env_str("TRAINYARD_CLUSTER_CONTEXT"),
    "request_timeout": env_float("TRAINYARD_CLUSTER_TIMEOUT", 10.0, minimum=0.1),
}
# Who admits jobs: "trainyard" (its own engine, jobs.admission) or "kueue" (Trainyard
# writes Kueue's ClusterQueues, LocalQueues, flavors and priority classes from its quotas
# and reads Kueue's decisions back; jobs.backends). See the README, "Connecting a cluster
# that runs Kueue".
TRAINYARD_ADMISSION_BACKEND = env_str("TRAINYARD_ADMISSION_BACKEND", "trainyard")
if TRAINYARD_ADMISSION_BACKEND not in {"trainyard", "kueue"}:
    raise ImproperlyConfigured(
        "TRAINYARD_ADMISSION_BACKEND must be trainyard or kueue, "
        f"not {TRAINYARD_ADMISSION_BACKEND!r}")
# The trainyard engine's admission loop: decide with the incremental engine
# (jobs.admission.incremental: the same decisions, recomputing only the GPU-model groups
# whose inputs changed; unchanged results kept up to 30 s as time passes) instead of in
# full every pass. Off by default: on busy clusters every group changes every pass and
# it saves nothing (bench/admission_scaling.py).
TRAINYARD_INCREMENTAL_ADMISSION = env_bool("TRAINYARD_INCREMENTAL_ADMISSION", False)
# Seconds between two admission passes that explain the queue (every waiting job's
# position, ETA and reason; jobs.admission.cadence): the passes between decide only. 0
# explains on every pass.
TRAINYARD_EXPLAIN_SECONDS = env_float("TRAINYARD_EXPLAIN_SECONDS", 2.0, minimum=0.0)
# Seconds the admission loop keeps the jobs' history (fair-share usage, run times of
# the last 30 days; jobs.selectors.recent_history) before reading it again. 0: every pass.
TRAINYARD_HISTORY_SECONDS = env_float("TRAINYARD_HISTORY_SECONDS", 60.0, minimum=0.0)
# The admission service (manage.py admission_service, jobs.service): how often it looks
# for changes, passes at most and at least, compares its memory with the database, and
# how long its lease lasts (seconds).
TRAINYARD_ADMISSION_SERVICE = {
    "poll_seconds": env_float("TRAINYARD_SERVICE_POLL_SECONDS", 0.05, minimum=0.001),
    "min_pass_seconds": env_float("TRAINYARD_SERVICE_MIN_PASS_SECONDS", 0.1, minimum=0.001),
    "idle_seconds": env_float("TRAINYARD_SERVICE_IDLE_SECONDS", 1.0, minimum=0.01),
    "verify_seconds": env_float("TRAINYARD_SERVICE_VERIFY_SECONDS", 60.0, minimum=1.0),
    "lease_seconds": env_float("TRAINYARD_SERVICE_LEASE_SECONDS", 15.0, minimum=1.0),
}
# Cluster writes in flight at once when the loop syncs a pass's jobs (jobs.sync_jobs)
TRAINYARD_SYNC_CONCURRENCY = env_int("TRAINYARD_SYNC_CONCURRENCY", 8, minimum=1)
# The RBAC group a tenant's people authenticate with (as the API server sees it, with
# any OIDC prefix); {tenant} is the tenant's slug.
TRAINYARD_TENANT_GROUP_FORMAT = env_str("TRAINYARD_TENANT_GROUP_FORMAT", "trainyard:{tenant}")
# StorageClasses and MIG profiles quota'd to zero unless granted (the observed cluster
# inventory adds to these).
TRAINYARD_STORAGE_CLASSES = env_list("TRAINYARD_STORAGE_CLASSES", [])
TRAINYARD_MIG_PROFILES = env_list(
    "TRAINYARD_MIG_PROFILES", ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"])
# The VolumeAttributesClass parameter that sets a volume's provisioned IOPS, per CSI
# driver, as a JSON object, e.g. {"csi.example.com": "iopsPerVolume"}; merged over the
# defaults in k8s_sync/storage.py (AWS EBS, GCE PD, Azure Disk, kubesim).
try:
    TRAINYARD_IOPS_PARAMETERS = json.loads(env_str("TRAINYARD_IOPS_PARAMETERS", "{}"))
except ValueError:
    raise ImproperlyConfigured("TRAINYARD_IOPS_PARAMETERS must be a JSON object") from None
if not isinstance(TRAINYARD_IOPS_PARAMETERS, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in TRAINYARD_IOPS_PARAMETERS.items()):
    raise ImproperlyConfigured("TRAINYARD_IOPS_PARAMETERS must map provisioner names to "
                               "parameter names (strings)")
# The provisioned-IOPS tiers a new volume may ask for (one shared VolumeAttributesClass
# per CSI driver and tier, k8s_sync/storage.py); an IOPS grant is the pool's total.
TRAINYARD_IOPS_TIERS = sorted({int(t) for t in env_list(
    "TRAINYARD_IOPS_TIERS", ["3000", "6000", "10000", "16000"]) if str(t).strip().isdigit()
    and int(t) > 0})
# Billing (issue 8): the one currency of every price and invoice; the prefix of invoice
# numbers (credit notes use "<prefix>C"); the quarterly quota recommendation lowers a
# GPU grant when the tenant's idle rate is above the threshold, to the busy share plus
# headroom, never cutting more than the max cut at once.
TRAINYARD_CURRENCY = env_str("TRAINYARD_CURRENCY", "USD")
TRAINYARD_INVOICE_PREFIX = env_str("TRAINYARD_INVOICE_PREFIX", "TY")
# The invoice document (issue 30): who issues it (name, postal address over several lines:
# "\n" or "|" separates them, tax id), the payment terms in days (due date = issue date +
# terms) and an optional tax rate in percent (empty: no tax, no tax line). An issued
# invoice keeps the values it was issued with (``billing.document.stamp``).
TRAINYARD_INVOICE_ISSUER_NAME = env_str("TRAINYARD_INVOICE_ISSUER_NAME", "Trainyard GPU Platform")
TRAINYARD_INVOICE_ISSUER_ADDRESS = env_str("TRAINYARD_INVOICE_ISSUER_ADDRESS", "")
TRAINYARD_INVOICE_ISSUER_TAX_ID = env_str("TRAINYARD_INVOICE_ISSUER_TAX_ID", "")
TRAINYARD_INVOICE_PAYMENT_TERMS_DAYS = env_int("TRAINYARD_INVOICE_PAYMENT_TERMS_DAYS", 30,
                                               minimum=0)
TRAINYARD_INVOICE_TAX_RATE = env_str("TRAINYARD_INVOICE_TAX_RATE", "")
try:
    if TRAINYARD_INVOICE_TAX_RATE and not (
            0 <= Decimal(TRAINYARD_INVOICE_TAX_RATE) <= 100):
        raise ValueError
except (ValueError, ArithmeticError):
    raise ImproperlyConfigured("TRAINYARD_INVOICE_TAX_RATE must be a percentage from 0 to "
                               "100, or empty for no tax") from None
TRAINYARD_IDLE_THRESHOLD = env_float("TRAINYARD_IDLE_THRESHOLD", 0.4, minimum=0.0)
TRAINYARD_IDLE_HEADROOM = env_float("TRAINYARD_IDLE_HEADROOM", 0.2, minimum=0.0)
TRAINYARD_IDLE_MAX_CUT = env_float("TRAINYARD_IDLE_MAX_CUT", 0.5, minimum=0.0)
# Quota loans (issue 30): an offer not accepted within this many hours expires, and both
# tenants' admins are told.
TRAINYARD_LOAN_OFFER_HOURS = env_int("TRAINYARD_LOAN_OFFER_HOURS", 24, minimum=1)
# Settings of the embedded cluster that `make run` starts.
KUBESIM_PORT = env_int("KUBESIM_PORT", 6443, minimum=1)
KUBESIM_SPEED = env_float("KUBESIM_SPEED", 60.0, minimum=0.0)
KUBESIM_PROFILE = env_str("KUBESIM_PROFILE", "default")

# --- Logging ------------------------------------------------------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # django-axes logs every login at INFO; failures and lockouts are WARNING
    "loggers": {"django.db.backends": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}

# --- GPU metrics in (k8s_sync.metrics) and Trainyard's metrics out (/metrics) -----------
# Prometheus with dcgm-exporter; unset: scrape TRAINYARD_DCGM_URLS, else the cluster's
# base URL + /metrics (the embedded kubesim serves DCGM-style metrics there).
PROMETHEUS_URL = env_str("PROMETHEUS_URL")
PROMETHEUS_TOKEN = env_secret("PROMETHEUS_TOKEN", "") or ""
TRAINYARD_DCGM_URLS = env_list("TRAINYARD_DCGM_URLS", [])
TRAINYARD_METRICS_SOURCE_TIMEOUT = env_float("TRAINYARD_METRICS_SOURCE_TIMEOUT", 5.0,
                                             minimum=0.1)
# Which metric family egress is billed from (k8s_sync.metrics.EGRESS_FAMILIES):
# "network-costs" (OpenCost/Kubecost network-costs daemonset,
# kubecost_pod_network_egress_bytes_total by destination: only traffic leaving the zone
# is billed) or "cadvisor" (container_network_transmit_bytes_total: every byte sent,
# in-cluster traffic included, priced as the internet).
TRAINYARD_EGRESS_METRICS = env_str("TRAINYARD_EGRESS_METRICS", "network-costs")
# /metrics is served to a bearer token or to clients in the allow-list (IPs or CIDRs);
# with neither set it answers 404.
TRAINYARD_METRICS_TOKEN = env_secret("TRAINYARD_METRICS_TOKEN", "") or ""
TRAINYARD_METRICS_ALLOW = env_list("TRAINYARD_METRICS_ALLOW", [])
# Usage series retention: minute rows, hourly rows (daily rows are kept).
TRAINYARD_USAGE_MINUTE_DAYS = env_int("TRAINYARD_USAGE_MINUTE_DAYS", 2, minimum=1)
TRAINYARD_USAGE_HOURLY_DAYS = env_int("TRAINYARD_USAGE_HOURLY_DAYS", 35, minimum=8)
