"""The per-rollout Claw service process (`python -m openforgerl.envs.services`); see `server.py`."""
