"""The computer a GUI agent drives, as the environment SDK gives it: the action API every GUI
environment implements (`actions`), its HTTP service (`service`), the client over it (`client`),
the Chromium the browser kinds launch (`chromium`) and the guard that keeps it on the task's apps
(`origin`). All stdlib: the service and the client run inside the sandbox on a rollout's clock."""
