#!/usr/bin/env bash
set -euo pipefail
WORKSPACE="${1:-workspace}"
echo $(( $(wc -l < "$WORKSPACE/meetings.csv") - 1 )) > "$WORKSPACE/count.txt"
