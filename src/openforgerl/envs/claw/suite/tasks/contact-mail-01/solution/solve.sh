#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw contacts find --query Bob
claw mail send --to bob.chen@acme.io --subject Slides --body 'The slides for Monday are in the shared drive.'
