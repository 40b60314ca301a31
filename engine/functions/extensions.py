"""The operator's extension folder (``ksql.extension.dir``): its Python modules loaded, their
functions installed. Does I/O (reads the folder, runs the modules' code).

Each ``*.py`` file directly in the folder is one module. It is run once, under a name made of its
file name and a digest of its text (``headwater_ext.<stem>_<digest>``), so two versions never mix
and a state pickled by one process unpickles in another that loaded the same text. What the
modules declare with `headwater.functions` becomes SQL functions; a module that fails to load, or
a function that clashes with a built-in or with another module's overload, is left out and
reported (`Loaded.problems`), and the server goes on with the rest.

Persistent queries carry the modules' texts in their payload (`payload`), and Spark's Python
workers, local or on other machines, load them from there (`ensure`) before they compile the
query: the same code runs wherever the query runs, and a worker never reads the folder.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import sys
import threading
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwater.engine.functions import user_index
from headwater.engine.functions.user import Declaration, collecting, stop_collecting
from headwater.engine.functions.user_index import UserFunction

log = logging.getLogger(__name__)

PACKAGE = "headwater_ext"
_MAX_MODULE_BYTES = 4 << 20  # a module's text travels in every query payload that needs it


@dataclass(frozen=True, slots=True)
class ModuleSource:
    """One module of the folder: its file name's stem, its text, and the text's digest."""

    stem: str
    text: str
    digest: str
    path: str = ""

    @property
    def module_name(self) -> str:
        """The name it runs under (``headwater_ext.<stem>_<digest>``)."""
        return f"{PACKAGE}.{self.stem}_{self.digest[:16]}"


@dataclass(frozen=True, slots=True)
class Loaded:
    """What loading a folder gave: the functions by name, the modules, and what was left out."""

    functions: dict[str, UserFunction]
    modules: tuple[ModuleSource, ...]
    problems: tuple[str, ...] = ()


def read_folder(folder: str | Path) -> tuple[list[ModuleSource], list[str]]:
    """The modules of ``folder`` (none when it does not exist), and the files it skipped."""
    root = Path(folder)
    if not root.is_dir():
        return [], []
    found: list[ModuleSource] = []
    problems: list[str] = []
    for path in sorted(root.glob("*.py")):
        if not path.stem.isidentifier():
            problems.append(f"{path}: not a module name, skipped")
            continue
        data = path.read_bytes()
        if len(data) > _MAX_MODULE_BYTES:
            problems.append(f"{path}: larger than {_MAX_MODULE_BYTES} bytes, skipped")
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            problems.append(f"{path}: not UTF-8 text, skipped")
            continue
        found.append(ModuleSource(path.stem, text, _digest(text), str(path)))
    return found, problems


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_lock = threading.Lock()
_modules: dict[str, tuple[types.ModuleType, list[Declaration]]] = {}  # by module name


def _package() -> types.ModuleType:
    found = sys.modules.get(PACKAGE)
    if found is None:
        found = types.ModuleType(PACKAGE)
        found.__path__ = []
        sys.modules[PACKAGE] = found
    return found


def _run(source: ModuleSource) -> list[Declaration]:
    """Runs one module (once per process per text) and returns what it declared.

    Raises:
        Exception: whatever the module's code raised.
    """
    with _lock:
        done = _modules.get(source.module_name)
        if done is not None:
            return done[1]
        _package()
        spec = importlib.util.spec_from_loader(source.module_name, loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        module.__file__ = source.path or f"<{source.stem}.py>"
        declared: list[Declaration] = []
        sys.modules[source.module_name] = module
        token = collecting(declared)
        try:
            code = compile(source.text, module.__file__, "exec")
            exec(code, module.__dict__)  # noqa: S102 - the operator's own folder, never SQL
        except BaseException:
            del sys.modules[source.module_name]
            raise
        finally:
            stop_collecting(token)
        stamped = [_with_module(d, source) for d in declared]
        _modules[source.module_name] = (module, stamped)
        return stamped


def _with_module(declaration: Declaration, source: ModuleSource) -> Declaration:
    from dataclasses import replace

    return replace(declaration, module=source.path or source.stem)


def load(sources: Sequence[ModuleSource], builtin: Iterable[str] = ()) -> Loaded:
    """Runs ``sources`` and groups their declarations into functions.

    Args:
        sources: the modules, in order.
        builtin: the names taken by the engine's own functions (a user function may not take one).
    """
    taken = {n.upper() for n in builtin}
    problems: list[str] = []
    declarations: list[Declaration] = []
    modules: list[ModuleSource] = []
    for source in sources:
        try:
            declared = _run(source)
        except Exception as error:  # noqa: BLE001 - the module's fault: left out, reported
            problems.append(f"{source.path or source.stem}: {type(error).__name__}: {error}")
            log.error("extension module %s not loaded: %s", source.path or source.stem, error)
            continue
        modules.append(source)
        declarations.extend(declared)
    functions: dict[str, UserFunction] = {}
    for declaration in declarations:
        name = declaration.name
        if name in taken:
            problems.append(
                f"{declaration.module}: {name} is a built-in function's name; not loaded"
            )
            continue
        known = functions.get(name)
        if known is not None and known.kind != declaration.kind:
            problems.append(
                f"{declaration.module}: {name} is already a {known.kind.lower()} function "
                f"({known.declarations[0].module}); not loaded"
            )
            continue
        params = [p.type for p in declaration.overload.all_params]
        if known is not None and any(
            [p.type for p in d.overload.all_params] == params for d in known.declarations
        ):
            problems.append(
                f"{declaration.module}: {name} already has an overload with parameters "
                f"({', '.join(t.sql() for t in params)}); not loaded"
            )
            continue
        functions[name] = UserFunction(
            declaration.kind,
            name,
            (*(known.declarations if known else ()), declaration),
        )
    for problem in problems:
        log.error("extension functions: %s", problem)
    return Loaded(functions, tuple(modules), tuple(problems))


def builtin_names() -> set[str]:
    """Every name the engine's own functions use."""
    from headwater.engine.functions import lambdas, registry
    from headwater.engine.functions.aggregates import AGGREGATE_NAMES

    return {
        *registry.FUNCTIONS,
        *lambdas.LAMBDA_FUNCTIONS,
        *AGGREGATE_NAMES,
        *BUILTIN_TABLE_FUNCTIONS,
    } - set(user_index.installed())


BUILTIN_TABLE_FUNCTIONS = ("EXPLODE", "CUBE_EXPLODE")

_current: Loaded = Loaded({}, ())


def load_folder(folder: str | Path) -> Loaded:
    """Loads the folder's modules and installs their functions (replacing any installed)."""
    sources, skipped = read_folder(folder)
    loaded = load(sources, builtin_names())
    loaded = Loaded(loaded.functions, loaded.modules, (*skipped, *loaded.problems))
    activate(loaded)
    return loaded


def activate(loaded: Loaded) -> None:
    """Installs ``loaded``'s functions, the engine's from now on."""
    global _current
    _current = loaded
    user_index.install(loaded.functions)


def current() -> Loaded:
    """What is installed."""
    return _current


def payload() -> dict[str, Any] | None:
    """The installed modules as a query payload carries them (stem, text, digest, path), and
    the call limit; None when there are none."""
    if not _current.modules:
        return None
    return {
        "modules": [
            {"stem": m.stem, "text": m.text, "digest": m.digest, "path": m.path}
            for m in _current.modules
        ],
        "callTimeoutMs": user_index.call_limit_ms(),
    }


def ensure(carried: Mapping[str, Any] | None) -> None:
    """Makes the functions of ``carried`` (a query payload's `payload`) the installed ones,
    loading their modules if this process has not yet, with their call limit. A worker calls it
    before it compiles a query."""
    if not carried:
        return
    user_index.set_call_limit(int(carried.get("callTimeoutMs") or 0))
    sources = [
        ModuleSource(str(s["stem"]), str(s["text"]), str(s["digest"]), str(s.get("path") or ""))
        for s in carried.get("modules") or ()
    ]
    if [m.digest for m in _current.modules] == [s.digest for s in sources]:
        return
    activate(load(sources, builtin_names()))


__all__ = [
    "BUILTIN_TABLE_FUNCTIONS",
    "Loaded",
    "ModuleSource",
    "activate",
    "current",
    "ensure",
    "load",
    "load_folder",
    "payload",
    "read_folder",
]
