"""The per-rollout Claw service process (`python -m openforgerl.envs.claw.services`); see `server.py`."""
