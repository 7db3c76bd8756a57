#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw mail draft --to luis.ortega@globex.com --subject 'Offsite venue' --body 'Here are three venue options for the offsite.'
