#!/usr/bin/env bash
# Harbor entry point: judge the live Claw service, write /logs/verifier/reward.json.
set -euo pipefail
mkdir -p /logs/verifier
"${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.verify --checks "$(dirname "$0")/checks.toml" \
  --workdir "${WORKDIR:-$PWD}" --out /logs/verifier/reward.json
