"""The import graph of mapnet_cli, walked statically (function-level, lazy imports included): no cycles,
and the layers of docs/architecture.md hold — a module imports only from its own layer and the ones below."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mapnet_cli"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the mapnet_cli modules it imports. `from . import x` counts as importing module x
    (not its package), so a package that re-exports its submodules is not a cycle with each of them."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


# Bottom to top. A top-level module or package of mapnet_cli belongs to exactly one layer.
LAYERS = [
    (
        "utilities",
        {
            "mapnet_cli",
            "errors",
            "atomic",
            "artefacts",
            "output_paths",
            "run_lock",
            "comma_list",
            "intervals",
            "metrics_file",
            "distributed",
            "plotting",
            "cpu_features",
        },
    ),
    ("settings", {"settings"}),
    ("data", {"data", "spread"}),
    ("model", {"model"}),
    ("masking", {"masking"}),
    ("train", {"train"}),
    ("evaluation", {"evaluation"}),
    ("pipelines", {"compare", "export", "quickstart"}),
    ("commands", {"commands", "cli"}),
]


def layer_of(module: str) -> int:
    top = module.split(".")[1] if "." in module else module
    found = [rank for rank, (_, members) in enumerate(LAYERS) if top in members]
    assert len(found) == 1, f"{module}: not in exactly one layer of LAYERS (add it where it belongs)"
    return found[0]


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every edge from a module to a module of a higher layer, as "a (layer) -> b (layer)"."""
    return [
        f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})"
        for a, targets in sorted(graph.items())
        for b in sorted(targets)
        if layer_of(b) > layer_of(a)
    ]


def test_the_walk_sees_known_edges():
    graph = import_graph()
    assert "mapnet_cli.masking.strategy" in graph["mapnet_cli.train.strategies"]
    assert "mapnet_cli.masking.designs" in graph["mapnet_cli.masking.strategy"]
    assert "mapnet_cli.train.run_loader" in graph["mapnet_cli.evaluation.variance.target"]  # a lazy import
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert layer_violations({"mapnet_cli.data.shards": {"mapnet_cli.train.loop", "mapnet_cli.errors"}}) == [
        "mapnet_cli.data.shards (data) -> mapnet_cli.train.loop (train)"
    ]


def test_mapnet_cli_has_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_lower_layers_never_import_higher_ones():
    """data never imports masking, train, evaluation, compare or commands; masking never imports train or
    above; train never evaluation or above (pretrain takes the variance measurement as an argument);
    nothing but cli.py and commands/ imports commands/."""
    assert layer_violations(import_graph()) == []


def test_no_command_imports_another_command():
    """Commands share code through commands/options.py, commands/progress.py and commands/shown.py (or the
    library), never through a sibling command: each stays one command's option parsing plus calls into the library."""
    shared = {
        "mapnet_cli.commands",
        "mapnet_cli.commands.options",
        "mapnet_cli.commands.progress",
        "mapnet_cli.commands.phases_shown",
        "mapnet_cli.commands.shown",
    }
    graph = import_graph()
    crossing = {
        name: sorted(t for t in targets if t.startswith("mapnet_cli.commands.") and t not in shared)
        for name, targets in graph.items()
        if name.startswith("mapnet_cli.commands.")
    }
    assert not {name: t for name, t in crossing.items() if t}
