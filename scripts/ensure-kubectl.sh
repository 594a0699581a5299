#!/usr/bin/env bash
# Exit 0 when a working kubectl is on PATH; otherwise install Debian's (package
# kubernetes-client) with apt. CI calls this on a fresh machine before the kubesim
# kubectl tests (pytest -m kubectl; they skip when there is no kubectl).
#
# If apt cannot install the package (e.g. another package already owns /usr/bin/kubectl
# but that kubectl does not work), the .deb is unpacked under $PREFIX/lib/kubernetes-client
# and linked as $PREFIX/bin/kubectl (PREFIX defaults to /usr/local, ahead of /usr/bin).
set -euo pipefail

PREFIX="${PREFIX:-/usr/local}"

works() {
    command -v kubectl >/dev/null 2>&1 && kubectl version --client >/dev/null 2>&1
}

if works && [ -z "${ENSURE_KUBECTL_FORCE:-}" ]; then
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

if [ -z "${ENSURE_KUBECTL_FORCE:-}" ] && $SUDO apt-get install -y -qq kubernetes-client && works; then
    echo "kubectl installed: $(command -v kubectl)"
    exit 0
fi

echo "ensure-kubectl: unpacking kubernetes-client under $PREFIX" >&2
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -qq kubernetes-client)
$SUDO mkdir -p "$PREFIX/lib/kubernetes-client" "$PREFIX/bin"
$SUDO dpkg -x "$tmp"/kubernetes-client_*.deb "$PREFIX/lib/kubernetes-client"
$SUDO ln -sf "$PREFIX/lib/kubernetes-client/usr/bin/kubectl" "$PREFIX/bin/kubectl"
if "$PREFIX/bin/kubectl" version --client >/dev/null 2>&1; then
    echo "kubectl: $PREFIX/bin/kubectl ($("$PREFIX/bin/kubectl" version --client 2>/dev/null | head -1))"
    exit 0
fi
echo "ensure-kubectl: kubectl still not working" >&2
exit 1
