"""The operator's transport settings for polls and probes, and where polls may go.

Not OME: OME's observer has no such settings (its client trusts the system's CA store,
sends no credentials and goes wherever an endpoint points). These keys are ours, under
`routing.observer`, and all of them are off by default, which keeps OME's behaviour:

- `caBundleFile`: PEM CA certificates that replace the system store for HTTPS polls.
- `clientCertFile`, `clientKeyFile`: a client certificate and its key, given together.
- `bearerTokenFile`: a token sent as `Authorization: Bearer` on HTTPS polls and probes,
  read again when the file changes.
- `allowCIDRs`, `denyCIDRs`: the addresses a poll may connect to, judged on the address
  it resolved to, when it connects: a denied address, or one outside a non-empty allow
  list, is not connected to.

`load_trust` reads the settings by type and checks what can be checked without I/O
(each CIDR parses, the certificate comes with its key); reading the files is the
observer's (`observer.trust`). `refusal` is the address rule.

Errors: `CapacityRuleError` (from `core.fields.invalid`), naming the field as the values
file spells it and its value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from typing import Any

from ome_routing.core.fields import invalid, read_mapping, read_string, show

OBSERVER = "routing.observer"
CA_BUNDLE_FIELD = f"{OBSERVER}.caBundleFile"
CLIENT_CERT_FIELD = f"{OBSERVER}.clientCertFile"
CLIENT_KEY_FIELD = f"{OBSERVER}.clientKeyFile"
TOKEN_FIELD = f"{OBSERVER}.bearerTokenFile"
ALLOW_FIELD = f"{OBSERVER}.allowCIDRs"
DENY_FIELD = f"{OBSERVER}.denyCIDRs"

#: Our keys of `routing.observer`, beside OME's limits.
TRUST_KEYS: tuple[str, ...] = (
    "caBundleFile",
    "clientCertFile",
    "clientKeyFile",
    "bearerTokenFile",
    "allowCIDRs",
    "denyCIDRs",
)

Network = IPv4Network | IPv6Network


@dataclass(frozen=True, slots=True)
class TrustSettings:
    """`routing.observer`'s transport settings; each file is a path, empty when unset."""

    ca_bundle_file: str = ""
    client_cert_file: str = ""
    client_key_file: str = ""
    bearer_token_file: str = ""
    allow: tuple[Network, ...] = ()
    deny: tuple[Network, ...] = ()

    @property
    def default(self) -> bool:
        """Nothing set: polls go as OME's do."""
        return self == TrustSettings()

    def files(self) -> tuple[tuple[str, str], ...]:
        """The files set, as (field, path)."""
        named = (
            (CA_BUNDLE_FIELD, self.ca_bundle_file),
            (CLIENT_CERT_FIELD, self.client_cert_file),
            (CLIENT_KEY_FIELD, self.client_key_file),
            (TOKEN_FIELD, self.bearer_token_file),
        )
        return tuple((name, path) for name, path in named if path)


def _path(block: Mapping[str, Any], key: str) -> str:
    value = block.get(key)
    if value is None:
        return ""
    field = f"{OBSERVER}.{key}"
    text = read_string(value, field)
    if text and not text.startswith("/"):
        raise invalid(f"{field} {show(text)} must be an absolute path")
    return text


def _networks(block: Mapping[str, Any], key: str) -> tuple[Network, ...]:
    value = block.get(key)
    field = f"{OBSERVER}.{key}"
    if value is None:
        return ()
    if not isinstance(value, list):
        raise invalid(f"{field} must be a list of CIDRs, got {show(value)}")
    networks: list[Network] = []
    for index, item in enumerate(value):
        entry = read_string(item, f"{field}[{index}]")
        try:
            # strict: "10.0.0.1/8" has host bits set, a likely typo for 10.0.0.0/8
            networks.append(ip_network(entry, strict=True))
        except ValueError as err:
            raise invalid(f"{field}[{index}] {show(entry)} is not a CIDR: {err}") from None
    return tuple(networks)


def load_trust(value: object) -> TrustSettings:
    """Read the transport settings of a `routing.observer` block (None: all off)."""
    if value is None:
        return TrustSettings()
    block = read_mapping(value, OBSERVER)
    settings = TrustSettings(
        ca_bundle_file=_path(block, "caBundleFile"),
        client_cert_file=_path(block, "clientCertFile"),
        client_key_file=_path(block, "clientKeyFile"),
        bearer_token_file=_path(block, "bearerTokenFile"),
        allow=_networks(block, "allowCIDRs"),
        deny=_networks(block, "denyCIDRs"),
    )
    if settings.client_cert_file and not settings.client_key_file:
        raise invalid(
            f"{CLIENT_CERT_FIELD} {show(settings.client_cert_file)} is set without "
            f"{CLIENT_KEY_FIELD}"
        )
    if settings.client_key_file and not settings.client_cert_file:
        raise invalid(
            f"{CLIENT_KEY_FIELD} {show(settings.client_key_file)} is set without "
            f"{CLIENT_CERT_FIELD}"
        )
    return settings


def refusal(address: str, settings: TrustSettings) -> str | None:
    """Why a poll may not connect to `address` (an IP address), or None if it may.

    The deny list wins over the allow list; an IPv4 address written as IPv6
    (`::ffff:169.254.169.254`) is judged as the IPv4 address it is.
    """
    if not settings.allow and not settings.deny:
        return None
    try:
        ip = ip_address(address.split("%", 1)[0])
    except ValueError:  # a resolver that answered something else: never connected to
        return f"address {address} is not an IP address"
    if isinstance(ip, IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for network in settings.deny:
        if ip.version == network.version and ip in network:
            return f"address {ip} is denied by {DENY_FIELD} {network}"
    if settings.allow and not any(
        ip.version == network.version and ip in network for network in settings.allow
    ):
        return f"address {ip} is not in {ALLOW_FIELD}"
    return None
