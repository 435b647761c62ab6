"""The dependencies used past their public API are the versions their adapter was written for.

`kube/lightkube_adapter.py` and `prometheus_adapter.py` each state the range of versions
they were written for (`SUPPORTED`). These tests fail when the installed version is outside
that range, when `pyproject.toml` allows another range, or when a private shape the adapter
relies on (a signature, an attribute, a hook) is no longer what it was written against.
"""

from __future__ import annotations

import dataclasses
import inspect
import ssl
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx2
import prometheus_client
import pytest
from lightkube import AsyncClient, KubeConfig
from lightkube.config import client_adapter
from lightkube.core import decoders, resource
from lightkube.core.exceptions import ApiError
from lightkube.core.generic_client import BasicRequest, GenericAsyncClient, GenericClient
from lightkube.resources.core_v1 import Pod
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from prometheus_client import metrics as prometheus_metrics

from ome_routing import prometheus_adapter
from ome_routing.kube import lightkube_adapter
from ome_routing.kube.resources import TrafficMap

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"

#: distribution name -> the range its adapter states
ADAPTERS = {
    "lightkube": lightkube_adapter.SUPPORTED,
    "prometheus-client": prometheus_adapter.SUPPORTED,
}


def declared(distribution: str) -> SpecifierSet:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    for line in dependencies:
        requirement = Requirement(line)
        if requirement.name == distribution:
            return requirement.specifier
    raise AssertionError(f"{distribution} is not a dependency in pyproject.toml")


def parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


@pytest.mark.parametrize("distribution", sorted(ADAPTERS))
def test_the_installed_version_is_one_its_adapter_was_written_for(distribution: str) -> None:
    installed = Version(version(distribution))
    assert installed in SpecifierSet(ADAPTERS[distribution]), (
        f"{distribution} {installed} is installed; its adapter was written for "
        f"{ADAPTERS[distribution]}: check every private shape it uses, then widen the range"
    )


@pytest.mark.parametrize("distribution", sorted(ADAPTERS))
def test_pyproject_allows_only_the_range_of_its_adapter(distribution: str) -> None:
    assert declared(distribution) == SpecifierSet(ADAPTERS[distribution])


def test_httpx2_is_declared_with_an_upper_bound() -> None:
    """lightkube's HTTP client is imported by routing itself, so it is a declared dependency."""
    specifier = declared("httpx2")
    assert Version(version("httpx2")) in specifier
    assert any(spec.operator == "<" for spec in specifier)


# --- lightkube: the request layer's shapes ------------------------------------------------


def a_config() -> Any:
    return KubeConfig.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    )


def test_an_async_client_holds_its_request_layer_and_the_layer_its_watch_timeout() -> None:
    client = AsyncClient(a_config(), trust_env=False)
    layer = client._client
    assert type(layer) is GenericAsyncClient
    assert isinstance(layer._watch_timeout, httpx2.Timeout)
    assert layer._watch_timeout.read is None
    assert isinstance(layer._client, httpx2.AsyncClient)


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        (GenericAsyncClient.send, ["self", "req", "stream"]),
        (
            GenericClient.prepare_request,
            ["self", "method", "res", "obj", "name", "namespace", "watch", "params", "headers"],
        ),
        (GenericClient.build_adapter_request, ["self", "br"]),
        (GenericClient.handle_response, ["self", "method", "resp", "br"]),
        (GenericClient.raise_for_status, ["resp"]),
        (client_adapter.Client, ["config", "conn_parameters"]),
        (decoders.decode_watch_event, ["line"]),
        (decoders.decode_status, ["data"]),
    ],
    ids=lambda value: getattr(value, "__qualname__", None),
)
def test_the_request_layer_calls_are_the_ones_the_adapter_makes(
    function: Any, expected: list[str]
) -> None:
    assert parameters(function) == expected


@pytest.mark.parametrize("method", ["request", "list_chunks", "watch"])
def test_every_request_of_the_layer_is_sent_through_its_own_send(method: str) -> None:
    """`filter_sends` wraps the layer's `send`: a request sent round it would pass no gate."""
    source = inspect.getsource(getattr(GenericAsyncClient, method))
    assert "await self.send(" in source
    assert "self._client.send(" not in source


def test_raise_for_status_is_a_static_method_of_the_request_layer() -> None:
    assert isinstance(inspect.getattr_static(GenericClient, "raise_for_status"), staticmethod)


def test_a_prepared_request_carries_a_body_and_a_timeout_of_its_own() -> None:
    fields = {field.name for field in dataclasses.fields(BasicRequest)}
    assert {"method", "url", "params", "data", "headers", "timeout"} <= fields
    assert "timeout" in {
        field.name for field in dataclasses.fields(client_adapter.ConnectionParams)
    }


def test_a_resource_class_names_its_kind_where_the_adapter_reads_it() -> None:
    assert resource.api_info(Pod) is Pod._api_info
    assert lightkube_adapter.kind_of(Pod) == "Pod"
    assert lightkube_adapter.kind_of(TrafficMap) == "TrafficMap"


def test_the_lease_wire_reads_what_the_client_would_send_with(monkeypatch: Any) -> None:
    """`tls_context`, `field_manager` and `proxied` (for `kube.lease_wire`): lightkube's
    TLS context of a config, its field manager, and httpx2's choice of a proxy per URL."""
    assert parameters(client_adapter.verify_cluster) == ["cluster", "user", "abs_file", "trust_env"]
    context = lightkube_adapter.tls_context(a_config().get())
    assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED
    client = AsyncClient(a_config(), trust_env=False, field_manager="fm")
    assert lightkube_adapter.field_manager(client) == "fm"
    assert not lightkube_adapter.proxied(client, "https://127.0.0.1:6443")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.2")
    through = AsyncClient(a_config(), field_manager="fm")  # trust_env: the environment's proxy
    assert lightkube_adapter.proxied(through, "https://127.0.0.1:6443")
    assert not lightkube_adapter.proxied(through, "https://127.0.0.2:6443")


def test_an_error_answer_is_the_api_error_lightkube_raises() -> None:
    status = b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"m","code":409}'
    error = lightkube_adapter.api_error(409, status)
    assert isinstance(error, ApiError)
    assert (error.status.code, error.status.message) == (409, "m")
    assert lightkube_adapter.api_error(503, b"[]").status.message == "HTTP 503: []"


# --- prometheus_client: the hooks of its metric classes ----------------------------------


@pytest.mark.parametrize("hook", ["_metric_init", "_child_samples", "_raise_if_not_observable"])
@pytest.mark.parametrize("cls", [prometheus_client.Counter, prometheus_client.Histogram])
def test_the_metric_hooks_the_adapter_overrides_or_calls_are_there(cls: type, hook: str) -> None:
    assert parameters(getattr(cls, hook)) == ["self"]


def test_the_library_says_whether_it_writes_created_series_in_one_flag() -> None:
    assert isinstance(prometheus_metrics._use_created, bool)


def test_a_histogram_keeps_its_bounds_with_infinity_last() -> None:
    histogram = prometheus_client.Histogram(
        "h", "H.", buckets=(0.5, 1.0), registry=prometheus_client.CollectorRegistry()
    )
    assert histogram._upper_bounds == [0.5, 1.0, float("inf")]
