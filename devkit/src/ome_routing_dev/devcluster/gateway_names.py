"""Private name resolution for processes that must resolve made-up hostnames on loopback.

Workload clusters' hosts (`chat.prod.worker-a.example.com`) exist nowhere but here: each is
mapped to its own 127.0.0.x address. A process that resolves them (the gateway, a
controller polling them) runs in a private mount namespace (`unshare -m --propagation
private`) in which a hosts file is bind-mounted over `/etc/hosts` and a resolv.conf over
`/etc/resolv.conf`; that resolv.conf names only a `DnsRecorder`, a UDP listener on a
loopback address that answers every query with REFUSED and records it. A name that is not in
the hosts file, or a resolver that asks DNS anyway (glibc's AAAA queries for names found in
`/etc/hosts`), reaches the recorder and nothing else, so no query leaves the machine and a
test can see every query that was made.

The namespace needs root (CAP_SYS_ADMIN); the recorder binds port 53 of a 127.x.y.z address.

Errors: `NamesError` (the recorder could not bind, or a name or address is not acceptable).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import socket
import struct
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_DNS_PORT = 53
_RCODE_REFUSED = 5
_BIND_ATTEMPTS = 20
# `sh -c` run by unshare: bind the two files, then become the real command.
_SANDBOX_SCRIPT = (
    'mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@"'
)


class NamesError(RuntimeError):
    """Private name resolution could not be set up."""


@dataclass(frozen=True)
class DnsQuery:
    """One question a resolver sent to the recorder."""

    name: str
    #: the query type's name (`A`, `AAAA`, ...) or its number
    type: str


_QTYPES = {1: "A", 5: "CNAME", 12: "PTR", 15: "MX", 16: "TXT", 28: "AAAA", 33: "SRV", 65: "HTTPS"}


def parse_query(packet: bytes) -> DnsQuery | None:
    """The first question of a DNS query, or None when the packet is not one."""
    if len(packet) < 12:
        return None
    offset, labels = 12, []
    while offset < len(packet):
        length = packet[offset]
        offset += 1
        if length == 0:
            break
        if length & 0xC0 or offset + length > len(packet):
            return None
        labels.append(packet[offset : offset + length].decode("ascii", "replace"))
        offset += length
    if offset + 4 > len(packet):
        return None
    (qtype,) = struct.unpack("!H", packet[offset : offset + 2])
    return DnsQuery(".".join(labels), _QTYPES.get(qtype, str(qtype)))


def refusal(packet: bytes) -> bytes:
    """The answer to a query: the same id and question, QR set, RCODE REFUSED, no records."""
    ident, flags = struct.unpack("!HH", packet[:4])
    opcode_rd = flags & 0x7900  # opcode and RD, copied as a server does
    header = struct.pack("!HHHHHH", ident, 0x8000 | opcode_rd | _RCODE_REFUSED, 1, 0, 0, 0)
    return header + packet[12:]


class DnsRecorder:
    """A UDP listener on 127.x.y.z:53 that refuses and records every query it gets."""

    def __init__(self, address: str | None = None) -> None:
        self._wanted = address
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._queries: list[DnsQuery] = []
        self.address = ""

    def start(self) -> DnsRecorder:
        candidates = (
            [self._wanted]
            if self._wanted
            else [
                f"127.53.{random.randrange(1, 255)}.{random.randrange(1, 255)}"
                for _ in range(_BIND_ATTEMPTS)
            ]
        )
        last: OSError | None = None
        for address in candidates:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                sock.bind((address, _DNS_PORT))
            except OSError as error:
                sock.close()
                last = error
                continue
            self._socket, self.address = sock, address
            break
        if self._socket is None:
            raise NamesError(f"the DNS recorder could not bind UDP port 53 on loopback: {last}")
        self._thread = threading.Thread(target=self._serve, name="dns-recorder", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        sock, self._socket = self._socket, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def queries(self) -> list[DnsQuery]:
        """Every query received so far, in order."""
        with self._lock:
            return list(self._queries)

    def _serve(self) -> None:
        sock = self._socket
        while sock is not None and sock is self._socket:
            try:
                packet, peer = sock.recvfrom(4096)
            except OSError:
                return
            query = parse_query(packet)
            if query is None:
                continue
            with self._lock:
                self._queries.append(query)
            with contextlib.suppress(OSError):
                sock.sendto(refusal(packet), peer)


class NameSandbox:
    """A hosts file, a resolv.conf naming a `DnsRecorder`, and the command that uses them."""

    def __init__(self, directory: Path, hosts: Mapping[str, str], *, record: bool = True) -> None:
        _check_loopback(hosts)
        self.dir = directory
        self.hosts = dict(hosts)
        #: False for a sandbox whose processes outlive this one: resolv.conf then names a
        #: loopback address nothing listens on (a query is refused by the kernel)
        self.record = record
        self.recorder = DnsRecorder()

    @property
    def hosts_file(self) -> Path:
        return self.dir / "hosts"

    @property
    def resolv_conf(self) -> Path:
        return self.dir / "resolv.conf"

    def start(self) -> NameSandbox:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.record:
            self.recorder.start()
        else:
            self.recorder.address = unbound_address()
        self._write_hosts()
        # One attempt, a short timeout: a refused query must not slow anything down.
        self.resolv_conf.write_text(
            f"nameserver {self.recorder.address}\noptions timeout:1 attempts:1\n"
        )
        return self

    def stop(self) -> None:
        self.recorder.stop()

    def add_hosts(self, hosts: Mapping[str, str]) -> None:
        """Map more names; processes in the namespace see them when they next read the file
        (glibc at every lookup, Go's resolver at most every 5 seconds).

        The lines are appended to the same file in one write: the bind mount holds this
        inode (a renamed file would not be seen), and a rewrite would leave a moment in
        which a resolver reading the file finds it empty and asks DNS instead.
        """
        _check_loopback(hosts)
        new = {}
        for name, address in hosts.items():
            known = self.hosts.get(name)
            if known is not None and known != address:
                raise NamesError(f"{name} already maps to {known}, not {address}")
            if known is None:
                new[name] = address
        if not new:
            return
        self.hosts.update(new)
        descriptor = os.open(self.hosts_file, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(descriptor, _host_lines(new).encode())
        finally:
            os.close(descriptor)

    def _write_hosts(self) -> None:
        localhost = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        self.hosts_file.write_text(localhost + _host_lines(self.hosts))

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside a private mount namespace that sees our hosts and resolv.conf."""
        return [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            _SANDBOX_SCRIPT,
            "sh",
            str(self.hosts_file),
            str(self.resolv_conf),
            *argv,
        ]


def unbound_address() -> str:
    """A 127.53.x.y address on whose UDP port 53 nothing listens right now."""
    for _ in range(_BIND_ATTEMPTS):
        address = f"127.53.{random.randrange(1, 255)}.{random.randrange(1, 255)}"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                sock.bind((address, _DNS_PORT))
            except OSError:
                continue
        return address
    raise NamesError("no free UDP port 53 on a 127.53.x.y address")


def _host_lines(hosts: Mapping[str, str]) -> str:
    return "".join(f"{address}\t{name}\n" for name, address in sorted(hosts.items()))


def _check_loopback(hosts: Mapping[str, str]) -> None:
    for name, address in hosts.items():
        if not ipaddress.ip_address(address).is_loopback:
            raise NamesError(f"{name} maps to {address}, which is not a loopback address")


def namespace_file(pid: int, path: str) -> str:
    """A file as the process `pid` sees it (through its mount namespace), e.g. /etc/hosts."""
    return Path(f"/proc/{pid}/root{path}").read_text()
