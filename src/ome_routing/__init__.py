"""ome-routing: the multi-cluster routing control plane of OME, with capacity polling."""

__version__ = "0.1.0"
