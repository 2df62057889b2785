"""Benchmarks of the placement extender: HTTP latency (served by gunicorn exactly as deployed),
cache sync / memory / watch throughput, and end-to-end scheduling throughput on the local
control plane. See BENCHMARKS.md for the commands and the figures.
"""
