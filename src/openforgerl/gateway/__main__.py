"""`python -m openforgerl.gateway ...` (same as `openforgerl gateway ...`, user mistakes included:
one `error:` line and exit 2, never a traceback)."""

import sys

from openforgerl.cli import main

sys.argv[1:1] = ["gateway"]
main()
