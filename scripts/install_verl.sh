#!/usr/bin/env bash
# Throwaway venv with veRL (CPU, no GPU extras) used only by tests/export/test_verl_contract.py to build
# veRL's own AgentLoopOutput from our export. It reuses the system site-packages (torch, transformers,
# pydantic) and adds just what `verl.experimental.agent_loop.agent_loop` imports at module level.
set -euo pipefail
VENV="${1:-$(cd "$(dirname "$0")/.." && pwd)/.venv-verl}"
python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q --no-deps "verl==0.9.1"
"$VENV/bin/pip" install -q hydra-core omegaconf "ray[default]" tensordict pillow codetiming cachetools
"$VENV/bin/python" -c "from verl.experimental.agent_loop.agent_loop import AgentLoopOutput; print('verl ok')"
