"""`python -m openforgerl.cli ...` (same as `openforgerl ...`)."""

from openforgerl.cli import main

main()
