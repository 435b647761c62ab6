"""The DNS recorder's packet handling: the question it records and the refusal it answers."""

from __future__ import annotations

import struct

from ome_routing_dev.devcluster.gateway_names import DnsQuery, parse_query, refusal


def a_query(name: str, qtype: int, ident: int = 0x1234, flags: int = 0x0100) -> bytes:
    header = struct.pack("!HHHHHH", ident, flags, 1, 0, 0, 0)
    labels = b"".join(bytes([len(part)]) + part.encode() for part in name.split("."))
    return header + labels + b"\0" + struct.pack("!HH", qtype, 1)


def test_a_query_is_recorded_with_its_name_and_type() -> None:
    packet = a_query("chat.prod.worker-a.example.com", 28)
    assert parse_query(packet) == DnsQuery("chat.prod.worker-a.example.com", "AAAA")


def test_an_unknown_query_type_is_recorded_by_number() -> None:
    assert parse_query(a_query("x.example.com", 999)) == DnsQuery("x.example.com", "999")


def test_a_packet_that_is_not_a_query_is_ignored() -> None:
    assert parse_query(b"\x00\x01") is None
    assert parse_query(a_query("x.example.com", 1)[:-3]) is None


def test_the_refusal_keeps_id_and_question_and_sets_refused() -> None:
    packet = a_query("x.example.com", 1, ident=0xBEEF)
    answer = refusal(packet)
    ident, flags, qdcount, ancount = struct.unpack("!HHHH", answer[:8])
    assert (ident, qdcount, ancount) == (0xBEEF, 1, 0)
    assert flags & 0x8000, "QR: a response"
    assert flags & 0x000F == 5, "RCODE: REFUSED"
    assert flags & 0x0100, "RD copied from the query"
    assert answer[12:] == packet[12:]
