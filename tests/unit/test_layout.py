"""The code a newcomer walks stays walkable: module and function sizes, no import cycles.

Limits (docs/architecture.md): no module over 400 lines and no function over 60 lines in
``layers/``, ``functions/`` and ``ops/``, unless the module docstring gives a one-line reason
starting with ``(Over 400 lines:`` or ``(Functions over 60 lines:``; no cycle among the
module-level imports of ``webhook_pipeline`` and ``webhook_pipeline_ops``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.unit

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
PACKAGES = {
    "webhook_pipeline": ROOT / "layers" / "common" / "webhook_pipeline",
    "webhook_pipeline_ops": ROOT / "ops" / "webhook_pipeline_ops",
}


OPS = ROOT / "ops" / "webhook_pipeline_ops"


def sized_files() -> list[Path]:
    folders = (ROOT / "layers", ROOT / "functions", OPS)
    return sorted(path for folder in folders for path in folder.rglob("*.py"))


def docstring(tree: ast.Module) -> str:
    return ast.get_docstring(tree) or ""


def oversized_modules(files: list[Path], base: Path = ROOT) -> list[str]:
    out = []
    for path in files:
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES and "(Over 400 lines:" not in docstring(ast.parse(text)):
            out.append(f"{path.relative_to(base)}: {lines} lines")
    return out


def oversized_functions(files: list[Path], base: Path = ROOT) -> list[str]:
    out = []
    for path in files:
        tree = ast.parse(path.read_text())
        if "(Functions over 60 lines:" in docstring(tree):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    out.append(f"{path.relative_to(base)}:{node.lineno} {node.name}: {length}")
    return out


def module_name(package: str, root: Path, path: Path) -> str:
    parts = [package, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports at module level (not in functions, not under
    ``if TYPE_CHECKING``)."""
    paths = {
        module_name(package, root, path): path
        for package, root in PACKAGES.items()
        for path in root.rglob("*.py")
    }
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name in paths)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module in paths:
                    graph[name].add(node.module)
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in paths:
                        graph[name].add(f"{node.module}.{alias.name}")
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_module_over_400_lines_without_a_reason() -> None:
    assert oversized_modules(sized_files()) == []


def test_no_function_over_60_lines_without_a_reason() -> None:
    assert oversized_functions(sized_files()) == []


def test_ops_is_sized() -> None:
    sized = {path.relative_to(OPS).as_posix() for path in sized_files() if OPS in path.parents}
    assert {
        "cli.py",
        "commands/local.py",
        "commands/chaos.py",
        "chaos/reconcile.py",
        "local/stack.py",
        "local/http_gateway.py",
        "simulator/sender.py",
        "local/moto_patches.py",
    } <= sized


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_the_checks_see_what_they_forbid(tmp_path: Path) -> None:
    long_module = tmp_path / "long.py"
    body = "\n".join(f"x{i} = {i}" for i in range(MAX_MODULE_LINES + 1))
    long_module.write_text(f'"""A module."""\n{body}\n')
    long_function = tmp_path / "fn.py"
    lines = "\n".join(f"    y{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    long_function.write_text(f'"""A module."""\n\n\ndef f() -> None:\n{lines}\n')
    with_reason = tmp_path / "reasoned.py"
    with_reason.write_text(f'"""A module.\n\n(Over 400 lines: one table.)\n"""\n{body}\n')
    files = [long_module, long_function, with_reason]
    assert [m.split(":")[0] for m in oversized_modules(files, tmp_path)] == ["long.py"]
    assert [m.split(":")[0] for m in oversized_functions(files, tmp_path)] == ["fn.py"]
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
