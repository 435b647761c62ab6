"""What `make check`'s dead-code check (vulture, `[tool.vulture]` in pyproject.toml) may not
call dead: each name is alive for the reason beside it, though nothing in the package,
`bench/` or `.ci/` uses it where vulture can see. A name that only the tests use says which
tests: it is part of a module's interface that they hold the product to. Every entry is
needed (tests/unit/test_dead_code.py): vulture reports each name without this file.

Not imported by anything; vulture reads it as code that uses these names.
"""

# ruff: noqa
# mypy: ignore-errors
_ = object()

# --- called by a framework, or by Python itself -------------------------------------------

# click calls a ParamType's `convert` for each value of an option that has the type
_.convert  # src/ome_routing/cli/params.py
# asyncio calls a Protocol's callbacks, httptools its parser callbacks (observer/transport.py)
_.connection_made
_.data_received
_.eof_received
_.connection_lost
_.on_header
_.on_headers_complete
_.on_chunk_header
_.on_chunk_complete
_.on_body
_.on_message_complete
# parameters that a protocol fixes: `__exit__`/`__aexit__`, and prometheus_client's
# `inc`/`observe` (prometheus_adapter.py)
exc_type
tb
exemplar
# prometheus_client calls these overrides of its collectors (prometheus_adapter.py)
_._metric_init
_._child_samples
# the dependency versions an adapter was written for, which
# tests/unit/test_dependency_adapters.py holds the installed versions to
# (kube/lightkube_adapter.py, prometheus_adapter.py)
SUPPORTED

# --- read or written by serialisation, or compared as a whole ------------------------------

# a Lease's `spec.acquireTime`, sent to the API server (kube/leader.py, kube/sharding.py)
_.acquireTime
# fields of NamedTuple keys, compared and hashed as a whole (kube/homes.py, kube/probing.py)
owner_uid
# an enum member, chosen by its value ("router") from a reporter's configuration
ROUTER  # src/ome_routing/reporter/counting.py
# the WorkloadCluster kind, registered with lightkube when the module is imported
WorkloadCluster  # src/ome_routing/kube/resources.py
# count of the preflight's reads that reached the API server, read by the publisher's tests
# (kube/publishing.py)
_.reads
# totals of a `PollCounts`, the plain `PollStats` (tests/integration/test_scheduling.py)
latency_seconds
waited_seconds
# every binary the node runs, resolved (and built when missing) before the node starts;
# containerd finds its shim, and kube-proxy iptables, on the PATH they share
containerd_shim  # devkit/src/ome_routing_dev/devcluster/node_tools.py
iptables

# --- interfaces the tests hold the product to -----------------------------------------------

# the other end of `MAX_NANOSECONDS`: Go's smallest Duration (tests/unit/test_durations.py)
MIN_NANOSECONDS
# the bound on Event writes that the module docstring states and tests/soak checks
writes_bound  # src/ome_routing/core/eventseries.py
_.next_token  # tests/unit/test_event_series.py
# the one-shot forms of OME's claim steps; `ClaimIndex` answers as they would over the whole
# fleet, and tests/unit/test_publication_claims.py holds it to them
legacy_lifecycle_problem
collision_problem
# the request budget's interface: a slot as a context manager, a wait as a future, and its
# counters (tests/integration/test_budget.py, tests/unit/test_fair_budget.py)
_.slot
_.wait_for_slot
_.stop_waiting
_.granted
_.waited_seconds
_.in_use
# the prefix of the observer's task names (tests/integration/test_scheduling.py)
WORKER_NAME  # src/ome_routing/observer/observer.py
# a replica killed by SIGKILL, for the sharding tests (tests/e2e/test_shard_leases.py)
_.abandon  # src/ome_routing/kube/sharding.py

# --- the development kit's interface, used by tests/ (bench/ is checked with the package) ---

# the names a gateway's sandbox resolved (tests/gateway)
_.queries  # devkit/src/ome_routing_dev/devcluster/gateway_names.py
# a file as the gateway's mount namespace sees it (tests/gateway)
namespace_file  # devkit/src/ome_routing_dev/devcluster/gateway_names.py
