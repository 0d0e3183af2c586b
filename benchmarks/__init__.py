"""The course's benchmarks: scripts run from the checkout (``.venv/bin/python benchmarks/bench_*.py``),
imported by their tests as ``benchmarks.bench_*`` (pytest puts the checkout on the path:
``pythonpath`` in pyproject.toml). Not installed: learners never import them."""
