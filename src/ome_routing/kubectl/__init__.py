"""`kubectl ome`: pure reports and tables for the plugin; the CLI in `cli.kubectl_ome` does the I/O.

Nothing here talks to the API server or reads a clock: functions take raw objects (the
JSON the API server returns) and `now`, and return values or strings.
"""
