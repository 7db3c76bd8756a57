#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw contacts find --query Carol
claw mail send --to carol.diaz@acme.io --subject 'Vendor list' --body 'I added two vendors to the shortlist.'
