# Every target sets itself up on a fresh machine: a virtualenv in .venv with the
# pinned dependencies of constraints.txt, and (for the Kubernetes tests and the
# demo) the local control plane's binaries, built once into ~/.cache/ome-routing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test test-compiled test-node check unit setup tools image demo clean

# the product (pyproject.toml) and its development kit (devkit/: the local control plane,
# node, gateways, image build, demo, and the test and check tools), both editable
$(STAMP): pyproject.toml devkit/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e . -e './devkit[test]'
	touch $(STAMP)

setup: $(STAMP)

## tools: fetch and build kube-apiserver, etcd, kubectl, helm, Traefik, Contour and promtool
## (cached; a no-op when present)
tools: $(STAMP)
	$(BIN)/ome-routing dev tools

## image: the controller image, in OCI layout and as a docker-archive, under ~/.cache/ome-routing/image
## (as root; installs mmdebstrap, umoci and skopeo with apt-get when missing; cached)
image: $(STAMP)
	$(BIN)/ome-routing dev image --source .

## demo: capacity polling end to end on a local control plane, checked against the specification,
## then real requests through the published gateway (Traefik). It builds only what it runs: the
## control plane's tools, and Traefik as root. The gateway runs in a private mount namespace,
## which needs root; as another user the demo runs without it.
demo: $(STAMP)
	@if [ "$$(id -u)" = 0 ]; then $(BIN)/ome-routing dev tools --only control-plane --only traefik \
	  && $(BIN)/ome-routing demo --traffic; \
	else echo "make demo: not root, so no gateway traffic (it needs a private mount namespace)"; \
	  $(BIN)/ome-routing dev tools --only control-plane && $(BIN)/ome-routing demo; fi

## check: lint, format, types, layer contracts and dead code (vulture: [tool.vulture] in
## pyproject.toml, what is alive without a visible caller in tools/vulture_allowlist.py)
check: $(STAMP)
	$(BIN)/ruff check src devkit tests bench .ci
	$(BIN)/ruff format --check src devkit tests bench .ci
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/vulture

## test: everything CI runs, in parallel lanes (.ci/lanes.py): checks, the Go tools built
## while the pure suites run, then every suite (as root, tests/node's one-node Kubernetes
## too), each suite with its own local control plane, and the unit and integration suites
## again on the poll path compiled with mypyc, as the controller image ships it. Each step's
## log is kept under .ci/logs/; the lanes' wall times, the slowest 20 tests and the skips
## are printed at the end; as root an unexpected skip fails the run.
test: $(STAMP)
	$(BIN)/python .ci/lanes.py

## test-compiled: the unit and integration suites on the compiled poll path (cached build)
test-compiled: $(STAMP)
	tree="$$($(BIN)/ome-routing dev compiled --source .)" && \
	  PYTHONPATH="$$tree" OME_ROUTING_EXPECT_COMPILED=1 \
	    $(BIN)/pytest tests/unit tests/integration -p no:cacheprovider -q

## test-node: the one-node Kubernetes suite (tests/node) alone, as root: the node's binaries
## (kubelet, kube-controller-manager, kube-scheduler, kube-proxy, containerd; built once)
## and the image first. `test` runs it too.
test-node: tools
	$(BIN)/pytest tests/node

## unit: the fast pure tests only
unit: $(STAMP)
	$(BIN)/pytest tests/unit

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .ci/logs
