"""The apps vigil's tests run inside pods (`python -m vigil_testapps.consumerapp`, `.podapp`, `.static_app`).

Their own distribution (`vigil-testapps`, `dev/testapps/`), installed in the `vigil-testapps` image next to
kafka-vigil: they import only the standard library, confluent-kafka and vigil's shipped packages, never
`vigil_dev` (import-linter contract `testapps-stand-alone`), so the image needs no development tooling.
"""
