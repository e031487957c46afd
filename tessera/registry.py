"""Registry of exportable RTL blocks.

Each ``hdl/<block>/__init__.py`` that has exportable blocks defines a module
attribute ``BLOCKS``: a list of :class:`BlockSpec`.  :func:`blocks` imports every
sub-package of :mod:`tessera.hdl` and collects them, so adding a block needs no
edit outside its own folder.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable, Sequence

from .params import Param, ParamError, check_all, parse_assignments


@dataclass(frozen=True)
class BlockSpec:
    """An exportable block.

    ``build(**params)`` returns the top :class:`amaranth.lib.wiring.Component`;
    it raises :class:`ParamError` (or ``ValueError``) for inconsistent values.
    ``verilog(params) -> (text, top_component)`` may be given to override the
    default ``verilog.convert`` (e.g. for meshes that emit a leaf module once
    and instantiate it with ``Instance``).
    ``leaf_modules`` names extra Verilog modules the text contains (manifest).
    """
    name: str
    build: Callable
    params: Sequence[Param] = ()
    doc: str = ""
    verilog: Callable | None = None
    extra_manifest: Callable | None = None   # params -> dict merged into the manifest
    clock_domains: Sequence[str] = ("sync",)
    # make demo: a short cocotb cosimulation against the golden model
    # (module path under tessera.tb, optional testcase name, parameters).
    demo_module: str | None = None
    demo_testcase: str | None = None
    demo_params: dict = field(default_factory=dict)

    def resolve(self, assignments: Sequence[str] = (), **values) -> dict:
        if assignments:
            out = parse_assignments(self.params, assignments)
            out.update(values)
            return check_all(self.params, out)
        return check_all(self.params, values)

    def elaborate_checked(self, params: dict):
        """Build the component; constructor ValueErrors become ParamError."""
        try:
            return self.build(**params)
        except ParamError:
            raise
        except ValueError as err:
            name = getattr(err, "param", None) or "config"
            raise ParamError(name, str(err)) from None


_CACHE: dict[str, BlockSpec] | None = None


def blocks() -> dict[str, BlockSpec]:
    global _CACHE
    if _CACHE is None:
        import tessera.hdl as hdl_pkg
        found: dict[str, BlockSpec] = {}
        for info in sorted(pkgutil.iter_modules(hdl_pkg.__path__), key=lambda i: i.name):
            if not info.ispkg:
                continue
            mod = importlib.import_module(f"tessera.hdl.{info.name}")
            for spec in getattr(mod, "BLOCKS", ()):
                if spec.name in found:
                    raise RuntimeError(f"duplicate block name {spec.name!r}")
                found[spec.name] = spec
        _CACHE = found
    return _CACHE


def get(name: str) -> BlockSpec:
    table = blocks()
    if name not in table:
        raise ParamError("BLOCK", f"unknown block {name!r}; known: {', '.join(sorted(table))}")
    return table[name]


def submodules(package, leaf: str):
    """(sub-package name, module) of every ``<package>.<sub>.<leaf>`` module that exists,
    in name order (a sub-package without one is skipped; other import errors propagate)."""
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        name = f"{package.__name__}.{info.name}.{leaf}"
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:
                continue
            raise
        yield info.name, mod


def model_clis():
    """(package name, module) of every ``tessera.sim_models.<pkg>.cli`` module:
    the system models' CLI (``add_parser``) and demo (``demo``) hooks."""
    import tessera.sim_models as pkg
    yield from submodules(pkg, "cli")
