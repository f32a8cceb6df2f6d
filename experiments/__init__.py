"""Benchmarks, paper tables and figures, diagnostics and shipping scripts; `common` is their one helper
module. Each script runs as a file (`python experiments/table1.py ...`) or as a module
(`python -m experiments.table1 ...`) from the repository root; results go to `results/<experiment>/`."""
