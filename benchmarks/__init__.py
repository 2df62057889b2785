"""Benchmarks of the placement extender, every one a workload run by `python -m benchmarks run`
(benchmarks/runner.py): HTTP latency (served by gunicorn exactly as deployed), in-process
profiles, group sizes, and on the local control plane (benchmarks/cluster.py) end-to-end
scheduling throughput, churn, and upstream's scheduler_perf. See BENCHMARKS.md for the commands
and the figures.
"""
