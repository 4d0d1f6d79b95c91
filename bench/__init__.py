"""Benchmark scripts and their recorded results (bench/results/)."""
