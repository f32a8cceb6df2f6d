"""Benchmarks, paper tables and figures, diagnostics and shipping scripts; `common` is their one helper
module. Each runs as a module from the repository root (`python -m experiments.table1 ...`); results go
to `results/<experiment>/`."""
