"""The CLI layer: one module per command, each parsing options and calling one library function.

These modules evaluate their annotations at import, without `from __future__ import annotations`: Typer reads every
option's annotation each time it builds the CLI, which is every `mapnet` start and every in-process CliRunner call of
the tests, and a string annotation costs it an `eval` per option per build (benchmarks/bench_cli_build.py times
both forms side by side; tests/test_cli_app.py keeps the annotations real). Types only a type checker needs stay
quoted.
"""
