"""Benchmarks: `make bench` runs them all (`python -m bench`); each also runs alone (`python -m bench.<area>`)."""
