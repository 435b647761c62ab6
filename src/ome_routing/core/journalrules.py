"""`routing.journal`: the chart's switch for the journal of weight changes (not OME's).

`routing.journal.enabled` (chart `journal.enabled`), a boolean, false when left out:
the journal goes beyond OME (OME's routing controller records no Events), so it is
opt-in, and off the controller makes no Event request. A value of the wrong type is
refused with the field and the value, as every other setting of the block.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ome_routing.core.fields import read_bool, read_mapping

JOURNAL_FIELD = "routing.journal"
JOURNAL_KEYS = ("enabled",)


def read_journal(multicluster: Mapping[str, Any]) -> bool:
    """Whether the journal is on; raises `CapacityRuleError` naming the field and value."""
    config = multicluster.get("config")
    routing = config.get("routing") if isinstance(config, Mapping) else None
    block = routing.get("journal") if isinstance(routing, Mapping) else None
    if block is None:
        return False
    journal = read_mapping(block, JOURNAL_FIELD)
    enabled = journal.get("enabled")
    return False if enabled is None else read_bool(enabled, f"{JOURNAL_FIELD}.enabled")
