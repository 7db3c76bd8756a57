#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw mail search --query 'action items'
claw mail read --id m5
claw todo add --title 'Update the onboarding doc'
claw todo add --title 'Book the offsite venue'
claw todo add --title 'Send the Q1 report to finance'
