"""Benchmarks of the placement extender, every one a workload run by `python -m benchmarks run`
(benchmarks/runner.py): HTTP latency (served by gunicorn exactly as deployed), in-process
profiles, cache sync / memory / watch throughput, and on the local control plane (benchmarks/
cluster.py) end-to-end scheduling throughput, its profile, churn, API priority, watch and stanza
costs. See BENCHMARKS.md for the commands and the figures.
"""
