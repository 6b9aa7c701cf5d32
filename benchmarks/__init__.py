"""Benchmarks for nbagent: harness overhead, append throughput, resume time and memory (``python -m benchmarks.run``)."""
