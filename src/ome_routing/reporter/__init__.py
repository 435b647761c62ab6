"""A reference capacity reporter for workload clusters (OME provides none)."""
