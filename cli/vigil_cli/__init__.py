"""The `vigil` command (`cli.main`), above every other package: it dispatches to the sidecar, the operator and the
report, and to the commands other distributions register (`vigil dev`, `vigil demo`: entry points)."""
