"""Command-line entry points: `ome-routing` and `kubectl-ome`."""
