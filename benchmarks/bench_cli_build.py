"""What building the CLI costs, with the command modules' annotations as objects (today) and as strings (with
`from __future__ import annotations`, as before): side by side, interleaved rounds, one process.

    uv run python benchmarks/bench_cli_build.py                 # min / median ms per build of each, and the ratio

Typer builds the whole command tree (`typer.main.get_command`) at every `mapnet` start and every in-process CliRunner
call of the tests, and reads each option's annotation then: a string annotation is evaluated again each time. The
string variant recompiles each command module's own source with the `annotations` future flag into a module of its
own, so it is mapnet's commands as they were, not a model of them. Run it alone on an otherwise idle machine (it
prints the load average before and after).
"""

from __future__ import annotations
import __future__

import argparse
import inspect
import os
import statistics
import sys
import time
import types

import typer
import typer.main

from mapnet_cli.cli import app


def _with_string_annotations(module_name: str) -> types.ModuleType:
    """The module `module_name` executed again from its source, compiled with `from __future__ import annotations`."""
    real = sys.modules[module_name]
    code = compile(inspect.getsource(real), real.__file__, "exec", flags=__future__.annotations.compiler_flag)
    module = types.ModuleType(f"{module_name}_as_strings")
    module.__package__, module.__file__ = real.__package__, real.__file__
    exec(code, module.__dict__)
    return module


def string_annotated(real_app: typer.Typer) -> typer.Typer:
    """`real_app`'s commands and groups, each callback taken from its module recompiled with string annotations."""
    copy = typer.Typer(**{k: getattr(real_app.info, k) for k in ("name", "help", "no_args_is_help")})
    for command in real_app.registered_commands:
        callback = getattr(_with_string_annotations(command.callback.__module__), command.callback.__name__)
        copy.command(command.name, help=command.help)(callback)
    for group in real_app.registered_groups:
        copy.add_typer(string_annotated(group.typer_instance), name=group.name)
    return copy


def ms_per_build(cli: typer.Typer, builds: int) -> float:
    start = time.perf_counter()
    for _ in range(builds):
        typer.main.get_command(cli)
    return 1000 * (time.perf_counter() - start) / builds


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--builds", type=int, default=20, help="builds per variant per round")
    args = ap.parse_args(argv)
    strings = string_annotated(app)
    found = [c.callback for c in strings.registered_commands]
    assert found and all(isinstance(h, str) for cb in found for h in inspect.get_annotations(cb).values())
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    times: dict[str, list[float]] = {"objects": [], "strings": []}
    ms_per_build(app, 1), ms_per_build(strings, 1)  # first builds import nothing more, but warm the caches
    for _ in range(args.rounds):
        times["objects"].append(ms_per_build(app, args.builds))
        times["strings"].append(ms_per_build(strings, args.builds))
    for name, ms in times.items():
        print(f"annotations as {name}: {min(ms):.1f} ms per build (min), {statistics.median(ms):.1f} (median)")
    ratio = statistics.median(times["strings"]) / statistics.median(times["objects"])
    print(f"strings / objects: {ratio:.1f}x (medians of {args.rounds} rounds x {args.builds} builds)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
