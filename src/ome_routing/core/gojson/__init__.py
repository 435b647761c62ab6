"""JSON read as Go's `encoding/json` reads it, and failing in its words.

OME reads capacity reports with `json.Unmarshal` and the drain annotation with a
`json.Decoder`'s tokens; its messages carry Go's error texts. One scanner (`scanner`)
owns Go's grammar, its messages and its kind names; `document` reads a whole report
body (fast through Python's `json`, through the scanner only when that refuses it);
`tokens` is the decoder's token stream.
"""

from ome_routing.core.gojson.document import decode, fold, members
from ome_routing.core.gojson.scanner import (
    END_OF_INPUT,
    GoJSONError,
    Number,
    kind,
    quote_char,
    read_document,
)
from ome_routing.core.gojson.tokens import Delim, Token, TokenStream, format_token

__all__ = [
    "END_OF_INPUT",
    "Delim",
    "GoJSONError",
    "Number",
    "Token",
    "TokenStream",
    "decode",
    "fold",
    "format_token",
    "kind",
    "members",
    "quote_char",
    "read_document",
]
