"""Environment packages: each brings a world the agent acts in and registers its task families
(tasks/families.py) when imported; the installed ones are listed as `openforgerl.environments` entry points.

- `claw/`: the personal-assistant world (services, tools, MCP server, shell CLI, verifier, shipped suite);
- `gui/` (shared GUI pieces) with `browser/` and `desktop/`, the GUI environment kinds;
- `importers/`: foreign benchmarks converted into task folders
  (`openforgerl tasks import`, in `cli/tasks.py`).

The task format, loader, validation and the Harbor runtime are generic and live in `openforgerl.tasks`.
"""
