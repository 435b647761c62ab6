"""Hypothesis strategies: JSON values, and documents shaped like the real ones but wrong."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

settings.register_profile(
    "fuzz-ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "fuzz", max_examples=50_000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def profile() -> settings:
    """The settings of the fuzz tests: `$OME_FUZZ_PROFILE`, `fuzz-ci` by default."""
    return settings.get_profile(os.environ.get("OME_FUZZ_PROFILE", "fuzz-ci"))


#: pytest-timeout's limit for one fuzz test: none for the long profile (minutes per test).
TIMEOUT = 0 if os.environ.get("OME_FUZZ_PROFILE") == "fuzz" else 300


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=16,
)
#: Values that are almost right: durations, names, counts near the limits.
NEAR = (
    st.none()
    | st.booleans()
    | st.integers(-3, 1_000_001)
    | st.sampled_from(
        [
            "10s",
            "1s",
            "500ms",
            "1m30s",
            "0s",
            "-1s",
            "10",
            "1h",
            "",
            " ",
            "control-plane",
            "Report",
            "report",
            "GET",
            "POST",
            "HEAD",
            "/capacity",
            "capacity",
            "http://x",
            "\x00",
            "PreserveTraffic",
            "Fallback",
            "true",
        ]
    )
)


def shaped(keys: list[str], depth: int = 3) -> st.SearchStrategy[Any]:
    """Mappings over `keys` (and a stray one) whose values are near-right or nested again."""
    key = st.sampled_from([*keys, "unknownField"])
    return st.recursive(
        NEAR | JSON,
        lambda inner: st.dictionaries(key, inner, max_size=6),
        max_leaves=8 * depth,
    )
