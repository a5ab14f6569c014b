"""Benchmarks that print the platform's throughput next to a bare-client baseline run alongside."""
