"""`ome-routing dev` and `ome-routing demo`, registered as `ome_routing.subcommands` entry points."""
