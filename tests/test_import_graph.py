"""The import graph of our packages: no cycle, no upward import, no private name in benchmarks.

Every `.py` file under data/, model/, training/, serving/, app/, recsys/ and benchmarks/ is
parsed with `ast` (nothing is imported); every import of one of our modules counts, at module
level or inside a function. Layers, lowest first: data < model < {training, serving} <
{app, recsys} < benchmarks; training and serving never import each other, nor app/api training;
the interfaces, app/ (the CLI and the HTTP API) and recsys/ (the Python API), never import each
other, and no package of ours imports recsys/. Inside training: its top-level modules
(samplers/, kernel_tree/ too) < evaluation < loop < workflows. The one upward import allowed:
`recsys bench` (app/commands/bench.py) imports the harness inside its command.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("data", "model", "training", "serving", "app", "recsys", "benchmarks")
PRODUCT = frozenset(PACKAGES[:-1])
LAYERS = {
    "data": 0, "model": 1, "training": 2, "serving": 2, "app": 3, "recsys": 3, "benchmarks": 4,
}  # fmt: skip
LAYER_TEXT = "data < model < training, serving < app, recsys < benchmarks"
TRAINING_LAYERS = {"evaluation": 1, "loop": 2, "workflows": 3}  # any other part of training: 0
TRAINING_TEXT = "training's modules, samplers, kernel_tree < evaluation < loop < workflows"
APART = {("training", "serving"), ("serving", "training"), ("app.api", "training")}
APART |= {("app", "recsys"), ("recsys", "app"), ("benchmarks", "recsys")}  # an API, not a layer
LAZY_ENTRY = ("app.commands.bench", "benchmarks")  # the thin `recsys bench` command


@dataclass(frozen=True)
class Import:
    """One import of a module of ours: `importer` (at `where`) takes `names` from `target`."""

    importer: str
    target: str
    names: tuple[str, ...]
    where: str
    lazy: bool  # inside a function: run when called, not when the importer is imported


def find_modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the `packages` folders of `root`."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if "__pycache__" not in parts:
                modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _base(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    parts = importer.split(".")[: None if is_package else -1]
    parts = parts[: len(parts) - node.level + 1]
    return ".".join([*parts, *([node.module] if node.module else [])])


def _ours(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of dotted `name` that is one of our modules, or None."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def _targets(
    node: ast.Import | ast.ImportFrom, importer: str, modules: dict[str, Path]
) -> dict[str, list[str]]:
    """Our modules the statement imports -> the names it takes from each ([] for `import x`)."""
    found: dict[str, list[str]] = {}
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = _ours(alias.name, modules)
            if target:
                found.setdefault(target, [])
        return found
    base = _base(importer, modules[importer].name == "__init__.py", node)
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        if submodule in modules:  # `from package import module`
            found.setdefault(submodule, [])
        elif (target := _ours(base, modules)) is not None:
            found.setdefault(target, []).append(alias.name)
    return found


def _statements(tree: ast.AST, lazy: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    """Every import statement in `tree`, and whether it sits inside a function."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, lazy
        inner = lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        yield from _statements(node, inner)


def imports_of(importer: str, modules: dict[str, Path], root: Path) -> list[Import]:
    """The imports of our modules in `importer`'s file."""
    path = modules[importer]
    found = []
    for node, lazy in _statements(ast.parse(path.read_text(), str(path))):
        assert isinstance(node, ast.Import | ast.ImportFrom)
        where = f"{path.relative_to(root)}:{node.lineno}"
        for target, names in _targets(node, importer, modules).items():
            if target != importer:
                found.append(Import(importer, target, tuple(names), where, lazy))
    return found


def find_cycles(imports: list[Import]) -> list[list[str]]:
    """One cycle per strongly connected group of modules (Tarjan), each as a closed path."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        graph.setdefault(imp.importer, set()).add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:  # `node` heads a group: the stack down to it
            group = set(stack[stack.index(node) :])
            del stack[stack.index(node) :]
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_closed_path(graph, group) for group in groups]


def _closed_path(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        node = frontier.pop(0)
        for nxt in sorted(graph[node] & group):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                frontier.append(nxt)
    raise AssertionError(f"no cycle through {start} in its own group")  # Tarjan found one


def _layer(module: str) -> tuple[str, int, int]:
    """(top package, its layer, its layer inside training)."""
    top, _, rest = module.partition(".")
    inner = TRAINING_LAYERS.get(rest.split(".")[0], 0) if top == "training" else 0
    return top, LAYERS[top], inner


def layer_problem(imp: Import) -> str | None:
    """Why `imp` breaks the layering, or None."""
    (top, rank, inner), (to_top, to_rank, to_inner) = _layer(imp.importer), _layer(imp.target)
    say = f"{imp.where}: {imp.importer} imports {imp.target}"
    if (imp.importer, to_top) == LAZY_ENTRY:
        return None if imp.lazy else f"{say}: import the harness inside the command, lazily"
    for low, high in APART:
        if (imp.importer + ".").startswith(low + ".") and (imp.target + ".").startswith(high + "."):
            return f"{say}: {low} never imports {high}"
    if top != to_top and rank < to_rank:
        return f"{say}: upward ({LAYER_TEXT})"
    if top == to_top == "training" and inner < to_inner:
        return f"{say}: upward inside training ({TRAINING_TEXT})"
    return None


def private_problem(imp: Import) -> str | None:
    """Why `imp`, a benchmark's import, reaches into the product's private names, or None."""
    if _layer(imp.importer)[0] != "benchmarks" or _layer(imp.target)[0] not in PRODUCT:
        return None
    private = [p for p in (*imp.target.split("."), *imp.names) if p.startswith("_")]
    private = [p for p in private if not p.endswith("__")]  # __init__, __version__: public
    if not private:
        return None
    return f"{imp.where}: {imp.importer} imports private {', '.join(private)} from {imp.target}"


def violations(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """Every cycle, upward import and benchmark import of a private name under `root`."""
    modules = find_modules(root, packages)
    imports = [imp for name in modules for imp in imports_of(name, modules, root)]
    cycles = sorted(f"import cycle: {' -> '.join(cycle)}" for cycle in find_cycles(imports))
    problems = [p for imp in imports for p in (layer_problem(imp), private_problem(imp)) if p]
    return cycles + sorted(problems)


def test_our_packages_have_no_cycle_no_upward_import_and_no_private_benchmark_import() -> None:
    found = violations(ROOT)
    assert not found, f"{len(found)} import problem(s):\n" + "\n".join(found)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_checker_finds_each_kind_of_planted_violation(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "data/__init__.py": "",
        "data/rows.py": "def f():\n    from model import towers\n",  # lazy counts too
        "model/__init__.py": "",
        "model/towers.py": "from . import config\n",
        "model/config.py": "import model.towers as t\n",
        "training/__init__.py": "",
        "training/_util.py": "_SECRET = 1\nPUBLIC = 2\n",
        "training/loop/fit.py": "from training.workflows.run import go\n",
        "training/workflows/run.py": "from training.loop import fit\nfrom .. import _util\n",
        "serving/index.py": "from training.loop.fit import x\n",
        "app/api/routes.py": "from training.workflows import run\nfrom serving import index\n",
        "app/commands/bench.py": "import benchmarks.cli\ndef bench():\n    import benchmarks.cli\n",
        "app/cli.py": "def main():\n    import recsys\n",
        "recsys/__init__.py": "from app.cli import main\n",
        "benchmarks/cli.py": "from training._util import A\nfrom training.loop.fit import _go\n",
    })  # fmt: skip
    found = violations(root)
    assert found == [
        "import cycle: app.cli -> recsys -> app.cli",
        "import cycle: model.config -> model.towers -> model.config",
        "import cycle: training.loop.fit -> training.workflows.run -> training.loop.fit",
        "app/api/routes.py:1: app.api.routes imports training.workflows.run: app.api never "
        "imports training",
        "app/cli.py:2: app.cli imports recsys: app never imports recsys",
        "app/commands/bench.py:1: app.commands.bench imports benchmarks.cli: import the harness "
        "inside the command, lazily",
        "benchmarks/cli.py:1: benchmarks.cli imports private _util from training._util",
        "benchmarks/cli.py:2: benchmarks.cli imports private _go from training.loop.fit",
        "data/rows.py:2: data.rows imports model.towers: upward (" + LAYER_TEXT + ")",
        "recsys/__init__.py:1: recsys imports app.cli: recsys never imports app",
        "serving/index.py:1: serving.index imports training.loop.fit: serving never imports "
        "training",
        "training/loop/fit.py:1: training.loop.fit imports training.workflows.run: upward "
        "inside training (" + TRAINING_TEXT + ")",
    ]
