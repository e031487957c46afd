"""The ``tessera`` command.

``tessera blocks`` lists exportable RTL blocks; ``tessera verilog BLOCK
[--param NAME=VALUE ...] --out DIR`` exports one; ``tessera report`` writes
build/report/index.html from every result present (:mod:`tessera.report`); ``tessera run-layer``
compiles a layer for the chiplet and checks it (:mod:`tessera.run_layer`).  System models add their
own sub-commands: any ``tessera.sim_models.<pkg>.cli`` module with a function
``add_parser(subparsers)`` is discovered (the parser it adds must set
``func=callable(args) -> int``).  Bad arguments exit with status 2 and one line.
"""
from __future__ import annotations

import argparse
import sys

from .params import ParamError


class _Parser(argparse.ArgumentParser):
    def error(self, message):          # one line, exit 2 (argparse's default prints usage too)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _cmd_blocks(args) -> int:
    from .registry import blocks
    for name, spec in sorted(blocks().items()):
        print(f"{name}: {spec.doc}")
        for p in spec.params:
            print(f"    {p.describe()}")
    return 0


def _cmd_verilog(args) -> int:
    from .export import export
    from .registry import get
    try:
        spec = get(args.block)
        params = spec.resolve(args.param or [])
        paths = export(spec, params, args.out)
    except ParamError as err:
        print(f"tessera verilog: error: {err}", file=sys.stderr)
        return 2
    for kind, path in paths.items():
        print(f"{kind:9s} {path}")
    return 0


def _cmd_report(args) -> int:
    from .report import run_cli
    return run_cli(args)


def _discover_model_clis(sub):
    from .registry import model_clis
    for _name, mod in model_clis():
        if hasattr(mod, "add_parser"):
            mod.add_parser(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tessera", description="Tessera: chiplet accelerator RTL and models")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("blocks", help="list exportable RTL blocks and their parameters")
    p.set_defaults(func=_cmd_blocks)
    p = sub.add_parser("verilog", help="export a block: BLOCK.v, BLOCK.manifest.json, BLOCK.f")
    p.add_argument("block")
    p.add_argument("--param", action="append", metavar="NAME=VALUE")
    p.add_argument("--out", required=True, metavar="DIR")
    p.set_defaults(func=_cmd_verilog)
    p = sub.add_parser("report", help="one HTML page with every bench result beside the paper")
    p.add_argument("--build", metavar="DIR", help="build directory (default $TESSERA_BUILD or build)")
    p.add_argument("--out", metavar="FILE", help="output (default BUILD/report/index.html)")
    p.add_argument("--quiet", action="store_true", help="print only the page's path")
    p.set_defaults(func=_cmd_report)
    from .run_layer import add_parser as _run_layer
    _run_layer(sub)
    _discover_model_clis(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
