"""`routing.observer`'s transport settings (ours, not OME's): read, checked, and the
address rule; and `validate-config`, which reports a bad one as the controller does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ome_routing.cli.main import main
from ome_routing.core.config import ConfigError, config_from_values
from ome_routing.core.fields import CapacityRuleError
from ome_routing.core.trustrules import TrustSettings, load_trust, refusal
from ome_routing.observer.trust import TrustError, prepare

PREFIX = "invalid multi-cluster configuration: "


def values(observer: dict[str, Any]) -> dict[str, Any]:
    routing = {"enabled": True, "observer": observer}
    return {
        "ome": {
            "multicluster": {
                "enabled": True,
                "role": "control-plane",
                "config": {"routing": routing},
            }
        }
    }


def values_yaml(observer_lines: str) -> str:
    return (
        "ome:\n  multicluster:\n    enabled: true\n    role: control-plane\n    config:\n"
        "      routing:\n        enabled: true\n        observer:\n"
        + "".join(f"          {line}\n" for line in observer_lines.splitlines())
    )


class TestDefaults:
    def test_nothing_set_is_omes_client(self) -> None:
        config = config_from_values(values({}))
        assert config.trust == TrustSettings()
        assert config.trust.default
        assert prepare(config.trust) is None

    def test_the_keys_are_known_so_they_warn_of_nothing(self) -> None:
        config = config_from_values(
            values({"denyCIDRs": ["169.254.0.0/16"], "allowCIDRs": [], "caBundleFile": ""})
        )
        assert config.warnings == ()
        assert [str(n) for n in config.trust.deny] == ["169.254.0.0/16"]

    def test_a_typo_beside_them_still_warns(self) -> None:
        config = config_from_values(values({"denyCIRDs": ["169.254.0.0/16"]}))
        assert len(config.warnings) == 1
        assert "routing.observer.denyCIRDs is ignored" in config.warnings[0]


class TestBadSettings:
    @pytest.mark.parametrize(
        ("observer", "message"),
        [
            (
                {"denyCIDRs": ["169.254.0.0/16", "10.0.0.0/33"]},
                'routing.observer.denyCIDRs[1] "10.0.0.0/33" is not a CIDR: '
                "'10.0.0.0/33' does not appear to be an IPv4 or IPv6 network",
            ),
            (
                {"allowCIDRs": ["10.0.0.1/8"]},
                'routing.observer.allowCIDRs[0] "10.0.0.1/8" is not a CIDR: '
                "10.0.0.1/8 has host bits set",
            ),
            (
                {"denyCIDRs": "169.254.0.0/16"},
                'routing.observer.denyCIDRs must be a list of CIDRs, got "169.254.0.0/16"',
            ),
            (
                {"denyCIDRs": [16]},
                "routing.observer.denyCIDRs[0] must be a string, got 16",
            ),
            (
                {"clientCertFile": "/etc/poll/tls.crt"},
                'routing.observer.clientCertFile "/etc/poll/tls.crt" is set without '
                "routing.observer.clientKeyFile",
            ),
            (
                {"clientKeyFile": "/etc/poll/tls.key"},
                'routing.observer.clientKeyFile "/etc/poll/tls.key" is set without '
                "routing.observer.clientCertFile",
            ),
            (
                {"caBundleFile": "ca.crt"},
                'routing.observer.caBundleFile "ca.crt" must be an absolute path',
            ),
            (
                {"bearerTokenFile": 7},
                "routing.observer.bearerTokenFile must be a string, got 7",
            ),
        ],
        ids=[
            "bad-cidr",
            "host-bits",
            "not-a-list",
            "not-a-string",
            "cert-without-key",
            "key-without-cert",
            "relative",
            "token-type",
        ],
    )
    def test_the_controller_refuses_them_naming_field_and_value(
        self, observer: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(ConfigError) as caught:
            config_from_values(values(observer))
        assert str(caught.value) == PREFIX + message

    def test_with_routing_off_they_are_not_judged(self) -> None:
        block = values({"denyCIDRs": ["nonsense"]})
        block["ome"]["multicluster"]["config"]["routing"]["enabled"] = False
        assert config_from_values(block).trust.default


class TestFiles:
    def test_an_unreadable_file_is_named_with_the_system_error(self, tmp_path: Path) -> None:
        missing = tmp_path / "ca.crt"
        with pytest.raises(TrustError) as caught:
            prepare(TrustSettings(ca_bundle_file=str(missing)))
        assert str(caught.value) == (
            f'routing.observer.caBundleFile "{missing}" cannot be read: no such file or directory'
        )

    def test_a_bundle_without_a_certificate_is_refused(self, tmp_path: Path) -> None:
        bundle = tmp_path / "ca.crt"
        bundle.write_text("not a certificate\n")
        with pytest.raises(TrustError, match=r'caBundleFile ".*ca.crt" holds no'):
            prepare(TrustSettings(ca_bundle_file=str(bundle)))

    def test_an_empty_token_is_refused(self, tmp_path: Path) -> None:
        token = tmp_path / "token"
        token.write_text("\n")
        with pytest.raises(TrustError) as caught:
            prepare(TrustSettings(bearer_token_file=str(token)))
        assert str(caught.value) == f'routing.observer.bearerTokenFile "{token}" is empty'

    def test_a_token_that_would_break_the_header_is_refused(self, tmp_path: Path) -> None:
        token = tmp_path / "token"
        token.write_bytes(b"abc\r\nX-Injected: 1")
        with pytest.raises(TrustError, match="holds a character that a header cannot carry"):
            prepare(TrustSettings(bearer_token_file=str(token)))

    def test_a_certificate_and_key_that_do_not_load_are_named_together(
        self, tmp_path: Path
    ) -> None:
        cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
        cert.write_text("x")
        key.write_text("y")
        with pytest.raises(TrustError) as caught:
            prepare(TrustSettings(client_cert_file=str(cert), client_key_file=str(key)))
        assert str(caught.value).startswith(
            f'routing.observer.clientCertFile "{cert}" and routing.observer.clientKeyFile '
            f'"{key}" are not a certificate and its key: '
        )


class TestAddressRule:
    @pytest.mark.parametrize(
        ("block", "address", "reason"),
        [
            ({}, "169.254.169.254", None),
            (
                {"denyCIDRs": ["169.254.0.0/16"]},
                "169.254.169.254",
                "address 169.254.169.254 is denied by routing.observer.denyCIDRs 169.254.0.0/16",
            ),
            (
                {"denyCIDRs": ["169.254.0.0/16"]},
                "::ffff:169.254.169.254",
                "address 169.254.169.254 is denied by routing.observer.denyCIDRs 169.254.0.0/16",
            ),
            (
                {"denyCIDRs": ["fe80::/10"]},
                "fe80::1%eth0",
                "address fe80::1 is denied by routing.observer.denyCIDRs fe80::/10",
            ),
            ({"denyCIDRs": ["fe80::/10"]}, "10.1.2.3", None),
            (
                {"allowCIDRs": ["10.0.0.0/8"]},
                "192.168.1.1",
                "address 192.168.1.1 is not in routing.observer.allowCIDRs",
            ),
            ({"allowCIDRs": ["10.0.0.0/8"]}, "10.1.2.3", None),
            (
                {"allowCIDRs": ["10.0.0.0/8"], "denyCIDRs": ["10.9.0.0/16"]},
                "10.9.0.1",
                "address 10.9.0.1 is denied by routing.observer.denyCIDRs 10.9.0.0/16",
            ),
            (
                {"allowCIDRs": ["10.0.0.0/8"]},
                "::1",
                "address ::1 is not in routing.observer.allowCIDRs",
            ),
            (
                {"denyCIDRs": ["169.254.0.0/16"]},
                "metadata.internal",
                "address metadata.internal is not an IP address",
            ),
        ],
    )
    def test_deny_wins_then_a_non_empty_allow_list_must_match(
        self, block: dict[str, Any], address: str, reason: str | None
    ) -> None:
        assert refusal(address, load_trust(block)) == reason

    def test_a_non_mapping_block_is_refused_by_type(self) -> None:
        with pytest.raises(CapacityRuleError, match=r"routing\.observer must be"):
            load_trust(["x"])


class TestValidateConfig:
    def run(self, tmp_path: Path, observer_lines: str) -> tuple[int, str, str]:
        path = tmp_path / "values.yaml"
        path.write_text(values_yaml(observer_lines))
        result = CliRunner().invoke(main, ["validate-config", "-f", str(path)])
        return result.exit_code, result.stdout, result.stderr

    def test_a_bad_cidr_is_the_controllers_line(self, tmp_path: Path) -> None:
        code, out, err = self.run(tmp_path, "denyCIDRs: [169.254.0.0/16, 169.254.169.254/33]")
        assert (code, out) == (1, "")
        assert err == (
            PREFIX + 'routing.observer.denyCIDRs[1] "169.254.169.254/33" is not a CIDR: '
            "'169.254.169.254/33' does not appear to be an IPv4 or IPv6 network\n"
        )

    def test_a_cert_without_its_key_is_the_controllers_line(self, tmp_path: Path) -> None:
        code, _, err = self.run(tmp_path, "clientCertFile: /etc/poll/tls.crt")
        assert code == 1
        assert err == (
            PREFIX + 'routing.observer.clientCertFile "/etc/poll/tls.crt" is set without '
            "routing.observer.clientKeyFile\n"
        )

    def test_an_unreadable_file_is_the_controllers_line(self, tmp_path: Path) -> None:
        missing = tmp_path / "token"
        code, out, err = self.run(tmp_path, f"bearerTokenFile: {missing}")
        assert (code, out) == (1, "")
        assert err == (
            PREFIX + f'routing.observer.bearerTokenFile "{missing}" cannot be read: '
            "no such file or directory\n"
        )

    def test_usable_settings_are_summarized(self, tmp_path: Path) -> None:
        token = tmp_path / "token"
        token.write_text("abc\n")
        code, out, err = self.run(
            tmp_path, f"bearerTokenFile: {token}\ndenyCIDRs: [169.254.0.0/16, fe80::/10]"
        )
        assert (code, err) == (0, "")
        assert out.splitlines()[1] == (
            f"poll transport: bearerTokenFile {token}, denyCIDRs [169.254.0.0/16 fe80::/10]"
        )
