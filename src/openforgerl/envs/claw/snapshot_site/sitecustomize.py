"""Loaded (through PYTHONPATH) by the Python that runs a grader's env-snapshot
command (`envs/claw/snapshot.py`).

That interpreter started with PYTHONSAFEPATH, so neither its script's folder nor its cwd is on its sys.path:
a module the agent planted beside upstream's check script cannot run inside it. The programs it starts are
the agent's own (upstream's checks run the agent's scripts), so they get upstream's environment back: no
safe path, no PYTHONPATH.
"""

import os

for _name in ("PYTHONSAFEPATH", "PYTHONPATH"):
    os.environ.pop(_name, None)
