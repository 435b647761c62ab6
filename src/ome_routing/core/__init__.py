"""The pure core: every rule of capacity polling and TrafficMap weights.

Nothing here performs I/O, reads a clock or imports an async, HTTP or Kubernetes
client; time (`now`) and inputs are arguments, results are values. The layer
contract in pyproject.toml (import-linter) enforces it.
"""
