"""The parts of the scale benchmark, benchmarks/bench_scale.py (its entry point): one module per job."""
