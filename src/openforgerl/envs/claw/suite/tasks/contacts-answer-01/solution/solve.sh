#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw contacts find --query Priya
claw answer submit --answer +1-555-0142
