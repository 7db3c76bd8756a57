"""The computer a GUI agent drives, as the environment SDK gives it: the action API every GUI
environment implements (`actions`), its HTTP service (`service`) and the client over it (`client`).
All stdlib: the service and the client run inside the sandbox on a rollout's clock."""
