"""The house by layers stays so: a small package root, Dagster only in defs/ and cli/ (the
ruff rule of `make lint`), no import cycles between the package's modules, no demo code at the
root, every asset with a code version."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "cost_pipeline"
MAX_ROOT_MODULES = 10


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """The cost_pipeline modules `path` imports, anywhere in the file (lazy imports too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("cost_pipeline")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cost_pipeline"):
            found.add(node.module)
            # `from cost_pipeline.demo import cur` imports the module cost_pipeline.demo.cur
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def test_the_package_root_holds_at_most_ten_modules_and_no_demo():
    modules = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= MAX_ROOT_MODULES, modules
    assert not [m for m in modules if m.startswith(("demo", "local_", "tool_", "bill_"))]


def test_dagster_is_imported_only_under_defs_and_cli():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is a test dependency"
    done = subprocess.run([ruff, "check", "--select", "TID251", "--output-format", "concise",
                           "cost_pipeline"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_package_has_no_import_cycles():
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {name: {m for m in _imports(path) if m in files and m != name}
             for name, path in files.items()}
    # a package imports its own __init__ implicitly: that is not a cycle of the code's making
    graph = {name: {m for m in deps if not name.startswith(m + ".")}
             for name, deps in graph.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}   # 1 visiting, 2 done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, cycles


def test_every_asset_has_a_code_version_and_the_inputs_have_no_ordering_edges(tmp_path):
    from cost_pipeline.definitions import build_defs

    graph = build_defs(str(tmp_path / "missing.yaml")).resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        assert graph.get(key).code_version, key
    for name in ("billing_facts", "tracker_runs", "checkpoint_inventory"):
        node = graph.get(__import__("dagster").AssetKey(name))
        assert not node.parent_keys, (name, node.parent_keys)


def test_the_readme_is_a_tour_that_links_the_docs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert "docs/architecture.md" in readme
    assert readme.index("make demo") < readme.index("docs/")
