"""Zhejiang Lab cluster_2000_A100: topology, per-port counters, hourly CSVs, task logs."""
