#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw contacts add --name 'Nora Blake' --email nora.blake@initech.com --phone +1-555-0150 --company Initech
