// The pause program of the local node's pod sandboxes (`ome-routing dev up --node`): holds a
// pod's namespaces, reaps orphans, and exits on SIGINT or SIGTERM, as Kubernetes' pause does.
module ome-routing/tools/pause

go 1.25.0
