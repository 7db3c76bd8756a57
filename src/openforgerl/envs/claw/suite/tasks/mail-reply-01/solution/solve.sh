#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw mail search --query Dana
claw mail reply --id m1 --body 'Yes, the Q2 marketing budget is still $48,000.'
