"""The computer a GUI agent drives, as the environment SDK gives it: the action API every GUI
environment implements (`actions`), its HTTP service (`service`), the client over it (`client`) and
the Chromium the browser kinds launch (`chromium`). All stdlib: the service and the client run inside
the sandbox on a rollout's clock."""
