#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw contacts find --query Bob
claw contacts update --id c1 --phone +1-555-0300
claw mail send --to bob.chen@acme.io --subject 'Updated your number' --body 'Hi Bob, your new number +1-555-0300 is saved.'
