"""ome-routing's development kit: what builds, runs and tests the product, never part of it.

- `devcluster`: the local control plane (etcd + kube-apiserver on loopback), the one-node
  Kubernetes, the gateways, the Go tools' builds, the controller image's build, the
  compiled poll path;
- `demo`: `ome-routing demo`, the specification's walkthrough on a local control plane;
- `cli`: `ome-routing dev` and `ome-routing demo`, which the product's `ome-routing`
  finds through the `ome_routing.subcommands` entry points of this distribution.

The kit imports the product; the product never imports the kit (`make check`'s layer
contracts). The controller's wheel and image hold the product alone.
"""
