"""The import graph of engram's own packages (ast-based; function-level imports count): no cycle between
modules, and the layers of STYLE.md (rules 1, 7 and 23): the client side never imports the server, the runtime
models and kernels never import the server, and only server/grpc speaks gRPC or touches the generated stubs."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("server", "models", "kernels", "training", "engram_proto", "engram_client", "engram_cli",
            "engram_integrations")
SERVER_SIDE = ("server", "models", "kernels", "training")
CLIENT_SIDE = ("engram_client", "engram_integrations")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, *, typing_only: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement, at any depth (functions, methods, try blocks), with whether it sits under
    ``if TYPE_CHECKING:`` (never executed, so it cannot close a cycle at run time)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, typing_only
        elif isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.body:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), typing_only=True)
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), typing_only=typing_only)
        else:
            yield from _imports(node, typing_only=typing_only)


def _resolve(name: str) -> str | None:
    """The module of ours that importing ``name`` runs: itself, else its nearest package of ours."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, str]]:
    """(the name as written, the module of ours it resolves to, or "") for each name one statement imports."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, _resolve(alias.name) or ""
        return
    if node.level:  # relative: from the module's own package upwards
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    for alias in node.names:
        full = f"{base}.{alias.name}"
        yield (full if full in MODULES else base), _resolve(full) or ""


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(run-time edges between our modules, every imported name per module, typing-only ones included)."""
    edges: dict[str, set[str]] = {name: set() for name in MODULES}
    names: dict[str, set[str]] = {name: set() for name in MODULES}
    for module, path in MODULES.items():
        for node, typing_only in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for written, target in _targets(module, node):
                names[module].add(written)
                if target and target != module and not typing_only:
                    edges[module].add(target)
    return edges, names


EDGES, NAMES = _graph()


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


def _top(name: str) -> str:
    return name.partition(".")[0]


def _violations(importers: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(f"{module} imports {name}" for module, imported in NAMES.items() if _top(module) in importers
                  for name in imported if _top(name) in forbidden)


def test_the_graph_sees_every_kind_of_import() -> None:
    """The walk finds function-level, relative and from-package imports (else the checks below prove nothing)."""
    assert "server.app" in EDGES["server.cli"]  # inside serve()
    assert "server.lexical.lucene" in EDGES["server.lexical"]
    assert "engram_client._core" in EDGES["engram_client.client"]  # ``from engram_client import _core``
    assert "engram_proto.v1.messages_pb2" in EDGES["engram_proto.v1.service_pb2"]
    assert len(MODULES) > 100


def test_cycle_detection_finds_a_cycle_through_a_function_level_import() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    cycles = _cycles(EDGES)
    assert not cycles, "import cycles (function-level imports included): " + "; ".join(" ↔ ".join(c) for c in cycles)


@pytest.mark.parametrize(("importers", "forbidden"), [
    (CLIENT_SIDE, SERVER_SIDE + ("engram_cli",)),          # rule 23: the client never imports the server
    (("engram_cli",), SERVER_SIDE),                         # serve/config come in as entry points of engram-server
    (("server", "models", "kernels"), ("training", "engram_client", "engram_cli", "engram_integrations")),
    (("models", "kernels"), ("server",)),                   # the runtime's lowest layers
    (("engram_proto",), SERVER_SIDE + CLIENT_SIDE + ("engram_cli",)),
])
def test_layers(importers: tuple[str, ...], forbidden: tuple[str, ...]) -> None:
    assert _violations(importers, forbidden) == []


def test_only_server_grpc_speaks_grpc() -> None:
    """STYLE rule 1: below server/grpc nothing imports grpc, the generated stubs or any *_pb2."""
    bad = sorted(f"{module} imports {name}" for module, imported in NAMES.items()
                 if _top(module) == "server" and not module.startswith("server.grpc")
                 for name in imported
                 if _top(name) in ("grpc", "grpc_health", "grpc_reflection", "engram_proto")
                 or name.rpartition(".")[2].endswith(("_pb2", "_pb2_grpc")))
    assert bad == []


def test_only_server_lexical_touches_the_jvm() -> None:
    """STYLE rule 7: pyjnius and pyserini only in server/lexical."""
    bad = sorted(f"{module} imports {name}" for module, imported in NAMES.items()
                 if not module.startswith("server.lexical") for name in imported
                 if _top(name) in ("jnius", "jnius_config", "pyserini"))
    assert bad == []
