#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw mail send --to alice@example.com --subject lunch --body 'lunch meeting' || { sleep 0.2; claw mail send --to alice@example.com --subject lunch --body 'lunch meeting'; }
