"""The observer: owns time and I/O for capacity polls (and later health probes).

It schedules one poll per home, shares the request budget, and hands readings and
failures to the core. It never computes weights.
"""
