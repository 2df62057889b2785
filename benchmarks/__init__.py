"""Benchmarks of the placement extender: HTTP latency (served by gunicorn exactly as deployed),
in-process profiles, cache sync / memory / watch throughput (these as workloads run by
`python -m benchmarks run`, benchmarks/runner.py), and end-to-end scheduling throughput on the
local control plane. See BENCHMARKS.md for the commands and the figures.
"""
