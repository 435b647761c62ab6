"""The custom resources routing reads and writes, as lightkube generic resources."""

from __future__ import annotations

from lightkube.generic_resource import create_global_resource, create_namespaced_resource

GROUP = "ome.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"

InferenceService = create_namespaced_resource(
    GROUP, VERSION, "InferenceService", "inferenceservices"
)
TrafficMap = create_namespaced_resource(GROUP, VERSION, "TrafficMap", "trafficmaps")
WorkloadCluster = create_global_resource(GROUP, VERSION, "WorkloadCluster", "workloadclusters")

#: The name of the field manager for every write the controller makes.
FIELD_MANAGER = "ome-routing"
