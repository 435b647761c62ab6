"""The chart's `routing.ramp.maxIncreasePerPeriod` (ours): read and checked at start."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from ome_routing.core.config import ConfigError, config_from_multicluster


def multicluster(**routing: Any) -> dict[str, Any]:
    return {
        "enabled": True,
        "role": "control-plane",
        "config": {"routing": {"enabled": True, **routing}},
    }


def test_without_a_ramp_there_is_none() -> None:
    config = config_from_multicluster(multicluster())
    assert config.ramp is None
    assert config.warnings == ()


@pytest.mark.parametrize("value", ["0.25", 0.25])
def test_the_fraction_is_read(value: object) -> None:
    config = config_from_multicluster(multicluster(ramp={"maxIncreasePerPeriod": value}))
    assert config.ramp is not None and config.ramp.fraction == Fraction(1, 4)
    assert config.warnings == ()


def test_an_empty_value_is_off() -> None:
    assert config_from_multicluster(multicluster(ramp={"maxIncreasePerPeriod": ""})).ramp is None


@pytest.mark.parametrize(
    ("ramp", "detail"),
    [
        (
            {"maxIncreasePerPeriod": "2"},
            'routing.ramp.maxIncreasePerPeriod ("2") must be a decimal fraction in (0, 1], '
            'such as "0.25"',
        ),
        (
            {"maxIncreasePerPeriod": 0},
            "routing.ramp.maxIncreasePerPeriod (0) must be a decimal fraction in (0, 1], "
            'such as "0.25"',
        ),
        ("0.5", 'routing.ramp must be a mapping of fields, got "0.5"'),
    ],
)
def test_a_bad_value_stops_the_start_naming_the_field_and_value(ramp: object, detail: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_multicluster(multicluster(ramp=ramp))
    assert str(err.value) == f"invalid multi-cluster configuration: {detail}"


def test_an_unknown_key_of_the_block_is_a_warning() -> None:
    config = config_from_multicluster(multicluster(ramp={"maxIncreasePerPerod": "0.5"}))
    assert config.warnings == (
        "unknown multi-cluster setting routing.ramp.maxIncreasePerPerod is ignored "
        "(known: maxIncreasePerPeriod)",
    )
