"""Transport trust in both charts, rendered by the real helm: the controller's pollTrust
mounts and the files they name in routing.observer, and the reporter's TLS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import CONFIGMAP, ROOT, Render, find, run_helm, template

from ome_routing.core.config import ConfigError, config_from_multicluster

REPORTER_CHART = ROOT / "charts" / "ome-capacity-reporter"
TRUST_DIR = "/etc/ome-routing/poll-trust"
ROUTING_ON = {
    "ome": {
        "multicluster": {
            "enabled": True,
            "role": "control-plane",
            "config": {"routing": {"enabled": True}},
        }
    }
}
ALL_SOURCES = {
    "pollTrust": {
        "caBundle": {"configMapName": "poll-ca", "key": "bundle.pem"},
        "clientCertificate": {"secretName": "poll-client"},
        "bearerToken": {"secretName": "poll-token"},
    }
}
OUR_KEYS = {
    "caBundleFile",
    "clientCertFile",
    "clientKeyFile",
    "bearerTokenFile",
    "allowCIDRs",
    "denyCIDRs",
}


def observer(docs: list[dict[str, Any]]) -> dict[str, Any]:
    configmap = find(docs, "ConfigMap", CONFIGMAP)
    block = yaml.safe_load(configmap["data"]["multicluster"])
    return dict(block["config"]["routing"]["observer"])


def pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(find(docs, "Deployment")["spec"]["template"]["spec"])


def with_observer(**keys: Any) -> dict[str, Any]:
    values = yaml.safe_load(yaml.safe_dump(ROUTING_ON))
    values["ome"]["multicluster"]["config"]["routing"]["observer"] = keys
    return values


class TestControllerChart:
    def test_by_default_nothing_of_ours_is_rendered_or_mounted(self, render: Render) -> None:
        docs = render(ROUTING_ON)
        assert not OUR_KEYS & set(observer(docs))
        (manager,) = pod(docs)["containers"]
        assert [m["name"] for m in manager["volumeMounts"]] == ["tmp"]
        assert [v["name"] for v in pod(docs)["volumes"]] == ["tmp"]

    def test_each_source_is_mounted_read_only_and_named_in_the_observer(
        self, render: Render
    ) -> None:
        docs = render(ROUTING_ON, ALL_SOURCES)
        block = observer(docs)
        assert {key: block[key] for key in OUR_KEYS & set(block)} == {
            "caBundleFile": f"{TRUST_DIR}/ca/bundle.pem",
            "clientCertFile": f"{TRUST_DIR}/client/tls.crt",
            "clientKeyFile": f"{TRUST_DIR}/client/tls.key",
            "bearerTokenFile": f"{TRUST_DIR}/token/token",
        }
        spec = pod(docs)
        (manager,) = spec["containers"]
        mounts = {m["name"]: m for m in manager["volumeMounts"]}
        for name in ("ca", "client", "token"):
            mount = mounts[f"poll-trust-{name}"]
            # a directory, never a subPath: the kubelet updates it when the Secret changes
            assert mount == {
                "name": f"poll-trust-{name}",
                "mountPath": f"{TRUST_DIR}/{name}",
                "readOnly": True,
            }
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["poll-trust-ca"]["configMap"] == {"name": "poll-ca", "defaultMode": 0o444}
        assert volumes["poll-trust-client"]["secret"] == {
            "secretName": "poll-client",
            "defaultMode": 0o444,
        }
        assert volumes["poll-trust-token"]["secret"]["secretName"] == "poll-token"

    def test_the_rendered_settings_pass_the_controllers_load(self, render: Render) -> None:
        docs = render(ROUTING_ON, ALL_SOURCES, with_observer(denyCIDRs=["169.254.0.0/16"]))
        configmap = find(docs, "ConfigMap", CONFIGMAP)
        config = config_from_multicluster(yaml.safe_load(configmap["data"]["multicluster"]))
        assert config.warnings == ()
        assert config.trust.bearer_token_file == f"{TRUST_DIR}/token/token"
        assert [str(n) for n in config.trust.deny] == ["169.254.0.0/16"]

    def test_a_bad_cidr_passes_the_chart_and_the_controller_names_it(self, render: Render) -> None:
        docs = render(with_observer(denyCIDRs=["169.254.0.0/16", "169.254.169.254/33"]))
        configmap = find(docs, "ConfigMap", CONFIGMAP)
        with pytest.raises(ConfigError) as caught:
            config_from_multicluster(yaml.safe_load(configmap["data"]["multicluster"]))
        assert str(caught.value).startswith(
            'invalid multi-cluster configuration: routing.observer.denyCIDRs[1] "169.254.169.254/33"'
        )

    def test_a_changed_source_rolls_the_controller(self, render: Render) -> None:
        def checksum(docs: list[dict[str, Any]]) -> str:
            annotations = find(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
            return str(annotations["checksum/config"])

        assert checksum(render(ROUTING_ON)) != checksum(render(ROUTING_ON, ALL_SOURCES))

    @pytest.mark.parametrize(
        ("values", "message"),
        [
            (
                {"pollTrust": {"caBundle": {"secretName": "a", "configMapName": "b"}}},
                'pollTrust.caBundle: set secretName ("a") or configMapName ("b"), not both',
            ),
            (
                {**with_observer(bearerTokenFile="/var/run/token"), **ALL_SOURCES},
                "pollTrust.bearerToken mounts the file of routing.observer.bearerTokenFile, "
                'which is set too ("/var/run/token"): set one of the two',
            ),
        ],
        ids=["secret-and-configmap", "file-set-both-ways"],
    )
    def test_settings_that_disagree_are_refused(
        self, helm: Path, tmp_path: Path, values: dict[str, Any], message: str
    ) -> None:
        path = tmp_path / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        result = template(helm, "-f", str(path))
        assert result.returncode != 0
        assert message in result.stderr

    @pytest.mark.parametrize(
        ("setting", "field"),
        [
            ("pollTrust.caBundle.secret=x", "secret"),
            ("ome.multicluster.config.routing.observer.denyCIDRs=169.254.0.0/16", "denyCIDRs"),
            ("ome.multicluster.config.routing.observer.caBundleFile[0]=x", "caBundleFile"),
        ],
        ids=["unknown-key", "cidrs-not-a-list", "file-not-a-string"],
    )
    def test_the_schema_refuses_a_wrong_shape(self, helm: Path, setting: str, field: str) -> None:
        result = template(helm, "--set", setting)
        assert result.returncode != 0
        assert "schema" in result.stderr and field in result.stderr


def render_reporter(helm: Path, tmp_path: Path, values: dict[str, Any]) -> list[dict[str, Any]]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    result = run_helm(helm, "template", "caps", str(REPORTER_CHART), "-f", str(path))
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


class TestReporterChart:
    def test_a_tls_secret_serves_https_with_its_certificate(
        self, helm: Path, tmp_path: Path
    ) -> None:
        docs = render_reporter(helm, tmp_path, {"tls": {"secretName": "reporter-tls"}})
        spec = pod(docs)
        (reporter,) = spec["containers"]
        assert reporter["args"][-2:] == [
            "--tls-cert-file=/etc/ome-routing/tls/tls.crt",
            "--tls-private-key-file=/etc/ome-routing/tls/tls.key",
        ]
        assert reporter["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
        assert reporter["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
        assert {"name": "tls", "mountPath": "/etc/ome-routing/tls", "readOnly": True} in reporter[
            "volumeMounts"
        ]
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["tls"]["secret"] == {"secretName": "reporter-tls", "defaultMode": 0o444}
        (port,) = find(docs, "Service")["spec"]["ports"]
        assert port["appProtocol"] == "https"

    def test_a_client_ca_requires_client_certificates(self, helm: Path, tmp_path: Path) -> None:
        values = {
            "tls": {
                "secretName": "reporter-tls",
                "clientCA": {"configMapName": "controller-ca", "key": "ca.pem"},
            }
        }
        spec = pod(render_reporter(helm, tmp_path, values))
        (reporter,) = spec["containers"]
        assert reporter["args"][-1] == "--client-ca-file=/etc/ome-routing/client-ca/ca.pem"
        # the kubelet has no client certificate: its probes only connect
        assert reporter["readinessProbe"]["tcpSocket"] == {"port": "http"}
        assert "httpGet" not in reporter["livenessProbe"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["client-ca"]["configMap"]["name"] == "controller-ca"

    def test_without_tls_it_serves_plain_http_as_before(self, helm: Path, tmp_path: Path) -> None:
        spec = pod(render_reporter(helm, tmp_path, {}))
        (reporter,) = spec["containers"]
        assert not any(arg.startswith("--tls") for arg in reporter["args"])
        assert "scheme" not in reporter["readinessProbe"]["httpGet"]
        assert [v["name"] for v in spec["volumes"]] == ["tmp"]

    def test_a_client_ca_without_a_certificate_is_refused(self, helm: Path, tmp_path: Path) -> None:
        path = tmp_path / "values.yaml"
        path.write_text(yaml.safe_dump({"tls": {"clientCA": {"secretName": "ca"}}}))
        result = run_helm(helm, "template", "caps", str(REPORTER_CHART), "-f", str(path))
        assert result.returncode != 0
        assert "tls.clientCA needs tls.secretName" in result.stderr
