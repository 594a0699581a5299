# Trainyard image: web (gunicorn), worker and beat run from the same image.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN apt-get update && apt-get install -y --no-install-recommends gettext \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home /app trainyard
WORKDIR /app
COPY pyproject.toml README.md ./
COPY core core
COPY portal portal
COPY tenants tenants
COPY jobs jobs
COPY billing billing
COPY k8s_sync k8s_sync
COPY kubesim kubesim
RUN pip install .
COPY . .
RUN DEBUG=true STATIC_MANIFEST=true python manage.py collectstatic --noinput -v 0 \
    && DEBUG=true python manage.py compilemessages -v 0
USER trainyard
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
