#!/usr/bin/env bash
# PyTorch, CPU build, for the one test that runs examples/train_resumable.py for real
# (tests/test_example_resume.py: start, SIGTERM, resume; it skips, saying why, when torch
# cannot be imported). Never fails the build.
#
# Why a pinned local version and pip, not the test extra and uv:
# * PyPI's torch for Linux x86_64 is the CUDA build: with its nvidia-* and triton
#   dependencies several GB; with --no-deps it does not even import on a CPU
#   ("libcudnn.so.9: cannot open shared object file", measured with 2.14.1).
# * A CPU build carries the local version "+cpu", which PyPI never serves: asking for
#   "torch==2.13.0+cpu" installs a CPU wheel where pip can find one (this project's
#   machines have it on disk, on pip's configured find-links; elsewhere point
#   PIP_FIND_LINKS or PIP_EXTRA_INDEX_URL at a CPU wheel or index) and otherwise fails at
#   once instead of downloading a CUDA build. uv does not read pip's configuration, so
#   the pin cannot live in pyproject's extras (uv would fail to resolve them).
# Cost, measured on a fresh venv of a 2-core machine: 192 MB wheel from disk plus its
# small pure-Python dependencies from PyPI, about 25 s, about 870 MB in the venv; once
# installed this script returns in about a second.
set -u
PY="${1:-.venv/bin/python}"
TORCH_REQ="${TRAINYARD_TORCH_REQUIREMENT:-torch==2.13.0+cpu}"
if "$PY" -c "import torch" >/dev/null 2>&1; then
    exit 0
fi
echo "ensure-torch: installing $TORCH_REQ (CPU build) for the example-resume test ..."
if ! "$PY" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
        "$TORCH_REQ" 2>&1 | grep -v "is ignored: it is neither a file nor a directory"; then
    :
fi
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
    echo "ensure-torch: no CPU build of torch could be installed ($TORCH_REQ);" \
         "tests/test_example_resume.py skips"
fi
exit 0
