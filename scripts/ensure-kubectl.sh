#!/usr/bin/env bash
# Exit 0 when a working kubectl is on PATH; otherwise install Debian's (package
# kubernetes-client) with apt. CI calls this on a fresh machine before the kubesim
# kubectl tests.
set -euo pipefail

works() {
    command -v kubectl >/dev/null 2>&1 && kubectl version --client >/dev/null 2>&1
}

if works; then
    echo "kubectl: $(command -v kubectl) ($(kubectl version --client 2>/dev/null | head -1))"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-kubectl: no kubectl and no apt-get; install kubectl by hand" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" != "0" ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Debian ships kubectl in the kubernetes-client package.
$SUDO apt-get install -y -qq kubernetes-client

if works; then
    echo "kubectl installed: $(command -v kubectl)"
    exit 0
fi
echo "ensure-kubectl: kubectl still not working after installing kubernetes-client" >&2
exit 1
