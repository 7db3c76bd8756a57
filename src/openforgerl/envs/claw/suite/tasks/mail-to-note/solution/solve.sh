#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw mail search --query Luis
claw mail read --id m5
claw notes write --title 'Luis action items' --content 'Update the onboarding doc
Book the offsite venue
Send the Q1 report to finance'
