"""The package layout: no import cycles among the repo's own modules, the lower packages never reach up, and
agent/ is a house of role folders on floors, each importing only from the floors below it.

The import graph is read from the source with ``ast`` (no module is imported): every ``import`` and
``from ... import`` statement counts, at module level, under ``if TYPE_CHECKING:`` and inside functions
alike, since a lazy import still ties the two modules together. Only imports of the packages below count.

Run it against another checkout to see what it finds there: ``python tests/test_layout.py /path/to/checkout``.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "storage", "alerts", "policies", "specwatch_core")
# What each package may not import. alerts/ sits below agent/, storage/ and policies/ below both, and none reaches
# up; specwatch_core/ (the record contracts, environment settings, redaction) sits below all of them and imports
# none of the repo's packages.
FORBIDDEN = {
    "storage": ("agent", "alerts"),
    "alerts": ("agent",),
    "policies": ("agent", "alerts"),
    "specwatch_core": tuple(p for p in PACKAGES if p != "specwatch_core"),
}
# agent/'s role folders by floor, top first. A module imports from its own folder or from a folder on a lower
# floor, never from one on its own floor or above, so each floor reads without those above it. Every folder of
# agent/ is on a floor.
FLOORS = (
    ("cli",),                                         # the `specwatch` command line
    ("proxy",),                                       # `specwatch proxy`: the OpenAI-compatible reverse proxy
    ("http", "demo", "hf"),                           # `specwatch serve`, the demo, transformers' generate()
    ("runtime", "guard", "advice", "pretrained"),     # wiring and running a sidecar; guard; recommend; real model
    ("hub", "kit"),                                   # the Sidecar and what it holds; the model kit
    ("decoding", "ring", "scrape", "engines", "workload"),  # the decoder; the step ring; engine pages; engine
                                                      # processes; prompt sets and replayed traffic
)
# Modules directly in agent/ besides its __init__.py: each belongs in a folder.
MAX_FLAT = 0
# Cycles still accepted, as the sorted tuple of their modules -> why. Empty: keep it that way.
ALLOWED_CYCLES: dict[tuple[str, ...], str] = {}


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> source file, for every module of PACKAGES under root (a package is its
    __init__.py)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is a known module (``agent.records.StepRecord`` ->
    ``agent.records``), or None for a name outside PACKAGES."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def imported_names(path: Path, module: str = "") -> set[str]:
    """Every dotted name the file's import statements name, anywhere in it: ``import a.b`` gives a.b,
    ``from a.b import x`` gives a.b.x (a module or a name in a.b). ``module`` (the file's dotted name)
    resolves relative imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package, up level - 1 more
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                package = package[:len(package) - (node.level - 1)]
                base = ".".join(package + ([base] if base else []))
            names.update(f"{base}.{alias.name}" if base else alias.name for alias in node.names)
    return names


def imports_of(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The known modules ``module`` imports anywhere in its source. ``from a.b import x`` counts as an
    import of a.b.x when that is a module, else of a.b."""
    targets = {_resolve(name, known) for name in imported_names(path, module)}
    targets.discard(None)
    targets.discard(module)
    return targets


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the repo modules it imports."""
    known = modules(root)
    return {module: imports_of(module, path, known) for module, path in known.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (each one or more cycles),
    by Tarjan's algorithm, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return sorted(components)


def shortest_cycle(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One shortest cycle through the component's first module, as the path a -> ... -> a."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph[node] & members):
                if succ == start:
                    chain = [node]
                    while chain[-1] != start:
                        chain.append(previous[chain[-1]])
                    return [*reversed(chain), start]
                if succ not in previous:
                    previous[succ] = node
                    following.append(succ)
        frontier = following
    return component


def describe(component: list[str], graph: dict[str, set[str]]) -> str:
    cycle = shortest_cycle(component, graph)
    return f"{' -> '.join(cycle)}  (modules in the cycle: {', '.join(component)})"


def cycles(root: Path = ROOT) -> list[str]:
    """One line per import cycle not in ALLOWED_CYCLES."""
    graph = import_graph(root)
    return [describe(c, graph) for c in strongly_connected(graph) if tuple(c) not in ALLOWED_CYCLES]


def upward_imports(root: Path = ROOT) -> list[str]:
    """``module -> imported`` for every import FORBIDDEN names."""
    graph = import_graph(root)
    bad = []
    for module, targets in sorted(graph.items()):
        forbidden = FORBIDDEN.get(module.split(".")[0], ())
        bad += [f"{module} -> {t}" for t in sorted(targets) if t.split(".")[0] in forbidden]
    return bad


def folder_of(module: str, root: Path = ROOT) -> str | None:
    """The role folder of an agent/ module (``agent.hub.sidecar`` -> ``hub``); None outside agent/ and for
    agent/'s own __init__.py and flat modules."""
    parts = module.split(".")
    return parts[1] if parts[0] == "agent" and len(parts) > 1 and (root / "agent" / parts[1]).is_dir() else None


def floor_faults(root: Path = ROOT) -> list[str]:
    """``module -> imported`` for every import between agent/ folders that does not go to a lower floor, and a
    line for each folder on no floor."""
    floor = {folder: level for level, folders in enumerate(FLOORS) for folder in folders}
    graph = import_graph(root)
    homeless = sorted({f for m in graph if (f := folder_of(m, root)) is not None and f not in floor})
    bad = [f"agent/{f}/ is on no floor of FLOORS" for f in homeless]
    for module, targets in sorted(graph.items()):
        here = folder_of(module, root)
        if here not in floor:
            continue
        bad += [f"{module} -> {t}" for t in sorted(targets)
                if (there := folder_of(t, root)) in floor and there != here and floor[there] <= floor[here]]
    return bad


def flat_modules(root: Path = ROOT) -> list[str]:
    """Modules directly in agent/, its __init__.py aside."""
    return sorted(m for m in modules(root) if m.startswith("agent.") and folder_of(m, root) is None)


def re_exports(root: Path = ROOT) -> list[str]:
    """Modules that only re-export names kept elsewhere: nothing in them but a docstring, imports and
    ``__all__``. A package's ``__init__.py`` may gather the names of its own modules (agent/kit/__init__.py)."""
    found = []
    for module, path in modules(root).items():
        body = ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        body = [n for n in body if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
        imports = [n for n in body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names_all = [n for n in body
                     if isinstance(n, ast.Assign) and [getattr(t, "id", "") for t in n.targets] == ["__all__"]]
        if not imports or len(imports) + len(names_all) < len(body):
            continue
        if path.name == "__init__.py" and all(
                name.startswith(module + ".") for name in imported_names(path, module)):
            continue
        found.append(module)
    return sorted(found)


def write_tree(root: Path, files: dict[str, str]) -> None:
    """A checkout of the given files (path -> text) under root."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_graph_sees_the_packages():
    graph = import_graph()
    assert {"agent.cli", "specwatch_core.records", "specwatch_core.redact", "storage.store", "alerts.watch",
            "policies.base"} <= set(graph)
    assert "specwatch_core.records" in graph["storage.store"]  # the graph sees module-level imports
    assert "agent.cli.stats" in graph["agent.cli"]  # and imports inside functions (_register)


def test_the_checks_find_what_they_look_for(tmp_path):
    """On a small tree with the faults the layout once had: a package root importing its command modules in a
    function while they import it back, a cycle through ``if TYPE_CHECKING:``, storage/ importing agent/,
    specwatch_core/ importing storage/ and a module kept only to re-export names under an old path."""
    write_tree(tmp_path, {
        "agent/__init__.py": "",
        "agent/cli/__init__.py": "def _register():\n    from agent.cli import stats\n",
        "agent/cli/stats.py": "from agent.cli import fail\n",
        "agent/lineage.py": '"""The old path."""\nfrom alerts.lineage import Lineage\n\n__all__ = ["Lineage"]\n',
        "agent/records.py": "",
        "alerts/__init__.py": "",
        "alerts/lineage.py": "import typing\nif typing.TYPE_CHECKING:\n    from alerts.watch import Config\n",
        "alerts/watch.py": "from alerts.lineage import Lineage\n",
        "storage/__init__.py": "",
        "storage/store.py": "import agent.records as records_module\n",
        "specwatch_core/__init__.py": "from storage import store\n",
    })
    assert cycles(tmp_path) == [
        "agent.cli -> agent.cli.stats -> agent.cli  (modules in the cycle: agent.cli, agent.cli.stats)",
        "alerts.lineage -> alerts.watch -> alerts.lineage  (modules in the cycle: alerts.lineage, alerts.watch)",
    ]
    assert upward_imports(tmp_path) == ["specwatch_core -> storage.store", "storage.store -> agent.records"]
    assert "agent.lineage" in re_exports(tmp_path)


def test_the_floor_checks_find_what_they_look_for(tmp_path):
    """On a small tree: the hub importing the HTTP edge above it, the kit importing the hub on its own floor,
    a folder on no floor and a module left flat in agent/. The HTTP edge importing the hub goes down: allowed."""
    write_tree(tmp_path, {
        "agent/__init__.py": "",
        "agent/extra.py": "",
        "agent/attic/__init__.py": "",
        "agent/attic/old.py": "from agent.hub.sidecar import Sidecar\n",
        "agent/http/__init__.py": "",
        "agent/http/api.py": "from agent.hub.sidecar import Sidecar\n",
        "agent/hub/__init__.py": "",
        "agent/hub/sidecar.py": "def build():\n    from agent.http.api import app\n",
        "agent/kit/__init__.py": "",
        "agent/kit/load.py": "from agent.hub import sidecar\n",
    })
    assert floor_faults(tmp_path) == [
        "agent/attic/ is on no floor of FLOORS",
        "agent.hub.sidecar -> agent.http.api",
        "agent.kit.load -> agent.hub.sidecar",
    ]
    assert flat_modules(tmp_path) == ["agent.extra"]


def test_no_import_cycles():
    found = cycles()
    assert not found, "import cycles among the repo's modules:\n" + "\n".join(found)


def test_allowed_cycles_still_exist():
    """An entry of ALLOWED_CYCLES whose cycle is gone is removed, so the list only shrinks."""
    graph = import_graph()
    present = {tuple(c) for c in strongly_connected(graph)}
    assert not set(ALLOWED_CYCLES) - present


def test_lower_packages_do_not_import_upward():
    found = upward_imports()
    assert not found, "lower packages importing upward:\n" + "\n".join(found)


def test_agent_folders_import_only_from_lower_floors():
    found = floor_faults()
    assert not found, "imports between agent/ folders that do not go down a floor:\n" + "\n".join(found)


def test_agent_keeps_few_flat_modules():
    found = flat_modules()
    assert len(found) <= MAX_FLAT, "modules directly in agent/ (each belongs in a role folder):\n" + "\n".join(found)


def test_packages_are_what_the_project_installs():
    """PACKAGES are the top-level names pyproject.toml installs, so every one of them is checked here. None may be
    the name of another distribution on PyPI (records and common were: their modules are specwatch_core/ now)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(include) == sorted(f"{p}*" for p in PACKAGES)


def test_no_module_only_re_exports():
    """A name has one home, and every user imports it from there: no module only passes on names kept
    elsewhere (agent/records.py, agent/redact.py and agent/settings.py once kept old paths working so)."""
    found = re_exports()
    assert not found, "modules that only re-export:\n" + "\n".join(found)


if __name__ == "__main__":
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    graph = import_graph(where)
    print(f"{where}: {len(graph)} modules, {sum(map(len, graph.values()))} imports")
    for component in strongly_connected(graph):
        print("cycle:", describe(component, graph))
    for line in upward_imports(where) + floor_faults(where):
        print("upward:", line)
    for module in re_exports(where):
        print("re-export only:", module)
    rooms = [f"agent/{folder}/" if (folder := folder_of(m, where)) else "agent/ (flat)"
             for m in graph if m.startswith("agent.")]
    for room in sorted(set(rooms), key=lambda room: (-rooms.count(room), room)):
        print(f"{rooms.count(room):4d} modules in {room}")
