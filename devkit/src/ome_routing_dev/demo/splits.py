"""How a split of requests is judged: exactly for a round robin, by a binomial test for draws.

Traefik's weighted round robin is deterministic: over a multiple of the weights' sum each
home serves exactly its share (`expected_split`). Envoy draws a cluster for each request
independently, with probability weight / total, so over `n` requests a home of weight `w`
serves X ~ Binomial(n, w / total): `split_is_plausible` is a two-sided exact binomial test
for every home with a positive weight, failing only when X falls in a tail whose probability
is at most FALSE_FAILURE / 2 on either side. A gateway that splits as weighted fails it with
probability at most FALSE_FAILURE (one in a million). At n = 300, weight 2 of 3 must serve
159..238 requests (a 1:1 split, 150, is outside); a home of weight 0 must serve exactly 0.
Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache

FALSE_FAILURE = 1e-6


def expected_split(weights: Mapping[str, int], requests: int) -> dict[str, int]:
    """What a weighted round robin serves over `requests` (a multiple of the weights' sum)."""
    total = sum(weights.values())
    return {c: requests * w // total for c, w in weights.items() if w} if total else {}


@cache
def acceptance(n: int, p: float, alpha: float = FALSE_FAILURE) -> tuple[int, int]:
    """The smallest `lo` and largest `hi` with P(X < lo) <= alpha/2 and P(X > hi) <= alpha/2
    for X ~ Binomial(n, p)."""
    if p >= 1.0:
        return n, n
    if p <= 0.0:
        return 0, 0
    pmf = [
        math.exp(
            math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            + k * math.log(p) + (n - k) * math.log1p(-p)
        )
        for k in range(n + 1)
    ]  # fmt: skip
    lo, tail = 0, 0.0
    while lo < n and tail + pmf[lo] <= alpha / 2:
        tail += pmf[lo]
        lo += 1
    hi, tail = n, 0.0
    while hi > 0 and tail + pmf[hi] <= alpha / 2:
        tail += pmf[hi]
        hi -= 1
    return lo, hi


def split_is_plausible(served: Mapping[str, int], weights: Mapping[str, int]) -> bool:
    """True when `served` ({home: requests}) passes the test for `weights` ({home: weight}):
    nothing outside the homes, exactly 0 for weight 0, each other home inside its interval."""
    n = sum(served.values())
    total = sum(weights.values())
    if set(served) - set(weights) or total == 0:
        return False
    for home, weight in weights.items():
        count = served.get(home, 0)
        if weight == 0:
            if count:
                return False
            continue
        lo, hi = acceptance(n, weight / total)
        if not lo <= count <= hi:
            return False
    return True
