#!/usr/bin/env bash
# The veRL venv used by the veRL tests (tests/export/test_verl_contract.py, tests/train/test_verl_*.py):
# veRL 0.9.1 with its own dependencies at versions it supports (transformers < 5.11), what its agent loop
# imports at module level (fastapi, uvicorn, cachetools, pillow), and openforgerl itself (editable,
# --no-deps: its base dependencies are in the same lock). Installed from locks/verl.txt only — no system
# site-packages, so the venv has exactly what the lock says on any machine.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-$ROOT/.venv-verl}"
PY="${PYTHON:-python3.11}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
check='from verl.experimental.agent_loop.agent_loop import AgentLoopOutput; import openforgerl.compose.verl_loop'
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "$check" 2>/dev/null; then
  # openforgerl's metadata (its entry points: task suites, environments) is written at install time, so a
  # venv made before a plug-in was added would not find it; reinstalling the editable package takes seconds
  "$VENV/bin/pip" install -q --no-deps -e "$ROOT"
  echo "veRL already installed in $VENV"; exit 0
fi
"$PY" -m venv --clear "$VENV"
"$VENV/bin/pip" install -q -r "$ROOT/locks/verl.txt"
"$VENV/bin/pip" install -q --no-deps -e "$ROOT"
"$VENV/bin/python" -c "$check; print('verl ok')"
