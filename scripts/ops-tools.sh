#!/usr/bin/env bash
# Makes sure the operations tools the deploy/ checks need are here, once per machine:
# promtool (Debian's `prometheus` package, which also ships the server the dashboard test
# scrapes with) and kubernetes-validate (PyPI, in a virtualenv under the user's cache,
# outside any clone, keyed by its version). Prints the kubernetes-validate command.
set -euo pipefail

KUBE_VALIDATE_VERSION=1.37.0
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/ranking-service/kubernetes-validate-$KUBE_VALIDATE_VERSION

if ! command -v promtool >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "ops-tools: promtool missing and not root; install Debian's prometheus package" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

if [ ! -x "$VENV/bin/kubernetes-validate" ]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "kubernetes-validate==$KUBE_VALIDATE_VERSION" >&2
fi
echo "$VENV/bin/kubernetes-validate"
