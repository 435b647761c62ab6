"""The Kubernetes layer: translate resources into core inputs and core results into writes."""
