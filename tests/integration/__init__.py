"""Integration tests: the observer against real servers on loopback."""
