"""Poll URLs as OME builds them: Go's `url.Parse`, OME's canonical endpoint, `url.JoinPath`.

The join and clean cases are the behaviour of Go's `net/url` and `path` packages
(`JoinPath`, `path.Clean`), written out as a table.
"""

from __future__ import annotations

import pytest

from ome_routing.observer.urls import (
    URLError,
    canonical_endpoint,
    clean_path,
    join_path,
    parse_url,
)


@pytest.mark.parametrize(
    ("base", "element", "joined"),
    [
        ("https://go.googlesource.com", "go", "https://go.googlesource.com/go"),
        ("https://go.googlesource.com/a/b/c", "../../../go", "https://go.googlesource.com/go"),
        ("https://go.googlesource.com/", "../go", "https://go.googlesource.com/go"),
        ("https://go.googlesource.com", "../go", "https://go.googlesource.com/go"),
        ("https://go.googlesource.com/../go", "", "https://go.googlesource.com/go"),
        ("https://go.googlesource.com/", "./go", "https://go.googlesource.com/go"),
        ("https://go.googlesource.com//", "/go", "https://go.googlesource.com/go"),
        ("https://go.googlesource.com", "go/", "https://go.googlesource.com/go/"),
        ("https://go.googlesource.com", "go//", "https://go.googlesource.com/go/"),
        ("https://go.googlesource.com/a%2fb", "c", "https://go.googlesource.com/a%2fb/c"),
        ("https://go.googlesource.com/a%2fb", "c%2fd", "https://go.googlesource.com/a%2fb/c%2fd"),
        ("https://go.googlesource.com/a/b", "/go", "https://go.googlesource.com/a/b/go"),
        ("http://h/a/", "/capacity", "http://h/a/capacity"),
        ("http://h/a", "/capacity/", "http://h/a/capacity/"),
        ("http://h/a", "/", "http://h/a/"),
        ("http://h/a", "/x/./y/../capacity", "http://h/a/x/capacity"),
        ("http://h/a", "/c d", "http://h/a/c%20d"),
        ("http://h/a", "/caf\u00e9", "http://h/a/caf%C3%A9"),
        ("http://h/a", "/%zz", "http://h/a"),
        ("http://h/a?x=1", "/capacity", "http://h/a/capacity?x=1"),
        ("http://[::1]:8080/a", "/capacity", "http://[::1]:8080/a/capacity"),
        ("a", "b", "a/b"),
        ("a", "../../b", "b"),
        ("", "../a", "a"),
    ],
)
def test_join_path_joins_and_cleans_as_go_does(base: str, element: str, joined: str) -> None:
    assert join_path(base, element) == joined


def test_join_path_fails_on_a_base_that_does_not_parse() -> None:
    with pytest.raises(URLError) as caught:
        join_path("http://[fe80::1%en0]:8080/", "/go")
    assert str(caught.value) == 'parse "http://[fe80::1%en0]:8080/": invalid URL escape "%en"'


@pytest.mark.parametrize(
    ("path", "cleaned"),
    [
        ("", "."),
        ("/", "/"),
        ("abc//def//ghi", "abc/def/ghi"),
        ("a/b/c/./../../g", "a/g"),
        ("abc/../../..", "../.."),
        ("/../abc", "/abc"),
        ("/abc/", "/abc"),
        ("./", "."),
    ],
)
def test_paths_are_cleaned_as_gos_path_clean_does(path: str, cleaned: str) -> None:
    assert clean_path(path) == cleaned


@pytest.mark.parametrize(
    ("endpoint", "canonical"),
    [
        ("HTTP://LLM.Worker-A.Example.COM/Qwen3/", "http://llm.worker-a.example.com/Qwen3"),
        ("http://h/.", "http://h"),
        ("http://h/", "http://h"),
        ("http://h", "http://h"),
        ("http://h/a/./b/../c//", "http://h/a/c"),
        ("http://h/a#fragment", "http://h/a"),
        ("http://h/a?x=1", "http://h/a?x=1"),
        ("http://h/a%2Fb", "http://h/a%2Fb"),
        ("http://h/a b", "http://h/a%20b"),
        ("https://h:8443", "https://h:8443"),
    ],
)
def test_an_endpoint_is_canonicalized_as_ome_does(endpoint: str, canonical: str) -> None:
    assert str(canonical_endpoint(endpoint)) == canonical


@pytest.mark.parametrize(
    ("endpoint", "why"),
    [
        ("", 'endpoint URL "" must be absolute'),
        ("/capacity", 'endpoint URL "/capacity" must be absolute'),
        ("http:h", 'endpoint URL "http:h" must be absolute'),
        ("mailto:a@h", 'endpoint URL "mailto:a@h" must be absolute'),
        ("ftp://h", 'endpoint URL "ftp://h" must use HTTP or HTTPS'),
        ("http://h:x", 'parse endpoint URL: parse "http://h:x": invalid port ":x" after host'),
        ("http://[::1", "parse endpoint URL: parse \"http://[::1\": missing ']' in host"),
        (
            "http://a b",
            'parse endpoint URL: parse "http://a b": invalid character " " in host name',
        ),
        ("http://h/%", 'parse endpoint URL: parse "http://h/%": invalid URL escape "%"'),
        ("://h", 'parse endpoint URL: parse "://h": missing protocol scheme'),
    ],
)
def test_an_endpoint_that_is_not_absolute_http_is_refused(endpoint: str, why: str) -> None:
    with pytest.raises(URLError) as caught:
        canonical_endpoint(endpoint)
    assert str(caught.value) == why


def test_a_control_character_is_refused_as_gos_parser_refuses_it() -> None:
    with pytest.raises(URLError) as caught:
        parse_url("http://h/a\nb")
    assert str(caught.value) == 'parse "http://h/a\\nb": net/url: invalid control character in URL'


def test_a_url_is_written_back_as_it_was_parsed() -> None:
    for text in ("http://u@h:1/a%2Fb?q=1#f", "https://[::1]:443/", "http://h/~a-b_c.d"):
        assert str(parse_url(text)) == text
