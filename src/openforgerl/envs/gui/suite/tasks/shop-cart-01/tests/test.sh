#!/usr/bin/env bash
# Harbor entry point: judge the apps' state and the workdir, write /logs/verifier/reward.json.
set -euo pipefail
mkdir -p /logs/verifier
"${OPENFORGERL_PYTHON:-python3}" -I -m openforgerl.envs.gui.verify --checks "$(dirname "$0")/checks.toml" \
  --state-url "${OPENFORGERL_GUI_APPS_URL:-}" --token "${OPENFORGERL_GUI_TOKEN:-}" --workdir "${WORKDIR:-$PWD}" \
  --out /logs/verifier/reward.json
