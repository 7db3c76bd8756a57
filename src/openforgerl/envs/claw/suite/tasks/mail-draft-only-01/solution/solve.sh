#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw mail draft --to dana.w@acme.io --subject 'Re: Q2 budget numbers' --body 'I will confirm the Q2 budget tomorrow.'
