#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the computer service (needs the rollout's token).
set -euo pipefail
"${OPENFORGERL_PYTHON:-python3}" -I -m openforgerl.envs.gui.oracle --actions "$(dirname "$0")/actions.json" \
  --token "$OPENFORGERL_GUI_TOKEN"
