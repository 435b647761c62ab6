"""The statistical check of a split that a gateway draws at random per request (Envoy).

The test is the demo's (`ome_routing_dev.demo.splits`): a two-sided exact binomial test for
every home with a positive weight, each tail at most FALSE_FAILURE / 2, and exactly 0 for a
home of weight 0. A gateway that splits as weighted fails one check with probability at
most 1e-6; the gateway suite makes fewer than 20 such checks a run, so a run fails falsely
with probability below 2e-5.
"""

from __future__ import annotations

from ome_routing_dev.demo.splits import FALSE_FAILURE, acceptance, split_is_plausible

__all__ = ["FALSE_FAILURE", "acceptance", "split_is_plausible"]
