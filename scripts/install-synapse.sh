#!/usr/bin/env bash
# Installs the Synapse that `npm run test:interop` federates with, into .synapse/venv (git-ignored),
# once: a run that finds this version already there does nothing. Pinned so that a new Synapse
# release never changes what the interop tests mean without a commit saying so; 1.163.2 is the
# newest 2026 release. It keeps Synapse's default database, SQLite, so no PostgreSQL is needed.
set -euo pipefail

SYNAPSE_VERSION=1.163.2
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="$ROOT/.synapse/venv"

fail() {
  echo "install-synapse: $1" >&2
  exit 1
}

installed_version() {
  "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("matrix-synapse"))' 2>/dev/null || true
}

if [ -x "$VENV/bin/python" ] && [ "$(installed_version)" = "$SYNAPSE_VERSION" ]; then
  echo "Synapse $SYNAPSE_VERSION is installed in .synapse/venv"
  exit 0
fi

PYTHON="${PYTHON:-python3}"
command -v "$PYTHON" >/dev/null || fail "Synapse needs Python 3.10 or newer, and there is no $PYTHON on PATH."
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  fail "Synapse $SYNAPSE_VERSION needs Python 3.10 or newer, and $PYTHON is $("$PYTHON" --version 2>&1)."

echo "Installing Synapse $SYNAPSE_VERSION into .synapse/venv"
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV" || fail "could not make a Python virtual environment in .synapse/venv ($PYTHON -m venv failed; on Debian, install python3-venv)."
"$VENV/bin/pip" install --quiet --disable-pip-version-check "matrix-synapse==$SYNAPSE_VERSION" ||
  fail "pip could not install matrix-synapse==$SYNAPSE_VERSION into .synapse/venv (see pip's output above)."
[ "$(installed_version)" = "$SYNAPSE_VERSION" ] || fail "pip finished, but .synapse/venv does not hold matrix-synapse $SYNAPSE_VERSION."
echo "Synapse $SYNAPSE_VERSION is installed in .synapse/venv"
