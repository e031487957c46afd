"""Assembler for the chiplet controller (:mod:`.controller` has the ISA table).

Python API (what the layer compiler will call)::

    p = Program(node_mesh=(4, 5), cmd_layout=command_layout(cfg))
    p.tmo(10_000)
    p.cfg(1, 2, reg=3, value=0x40)
    p.cmd(op=OP_SEND, tag=1, a=0, cnt0=16, tile=4, groups=1)
    p.wait([(1, 2)], gpe=True)
    p.end()
    words = p.words

and a text form, one instruction a line (``#`` comments)::

    TMO 10000
    CFG 1 2 3 0x40          # x y reg value
    CMD op=0 tag=1 a=0 cnt0=16 tile=4 groups=1
    WAIT 1,2 0,0 G          # nodes as x,y; G = also all Global PE commands
    BAR 1
    END

``CMD`` expands to the ``CMDW`` chunks that differ from what the command
register holds at that point (all chunks for the first command: the register
is not reset by ``start``), then ``CMD``.  The assembler checks field ranges
but deliberately does *not* reject a node outside the mesh or a WAIT on a
node outside it (``cfg(..., check=False)``, ``wait_mask``): the controller
must catch those at run time, and tests need to write such programs.
"""
from __future__ import annotations

from tessera.hdl.global_pe.packets import pack_fields

from . import isa


class Program:
    def __init__(self, node_mesh=(4, 5), cmd_layout=None):
        self.nx, self.ny = node_mesh
        self.cmd_layout = cmd_layout
        self.words: list[int] = []
        self._cmdreg: list[int | None] | None = None

    # -- instructions ------------------------------------------------------------------
    def raw(self, word: int):
        self.words.append(int(word) & ((1 << isa.INST_BITS) - 1))
        return self

    def end(self):
        return self.raw(isa.encode(isa.OP_END))

    def cfg(self, x, y, reg, value, check=True):
        if check and not (0 <= x < self.nx and 0 <= y < self.ny):
            raise ValueError(f"CFG node ({x}, {y}) outside the {self.nx}x{self.ny} mesh")
        return self.raw(isa.encode(isa.OP_CFG, x=x, y=y, reg=reg, imm=value))

    def cmdw(self, k, value):
        return self.raw(isa.encode(isa.OP_CMDW, k=k, imm=value))

    def cmd(self, word: int | None = None, **fields):
        """Issue a Global PE command given as a packed int or as command_layout fields."""
        if self.cmd_layout is None:
            raise ValueError("Program needs cmd_layout to assemble CMD")
        if word is None:
            word = pack_fields(self.cmd_layout, **fields)
        n = -(-self.cmd_layout.size // isa.CMD_CHUNK)
        if self._cmdreg is None:
            self._cmdreg = [None] * n
        for k in range(n):
            chunk = (word >> (isa.CMD_CHUNK * k)) & 0xFFFF
            if self._cmdreg[k] != chunk:
                self.cmdw(k, chunk)
                self._cmdreg[k] = chunk
        return self.raw(isa.encode(isa.OP_CMD))

    def wait_mask(self, mask: int, gpe=False):
        return self.raw(isa.encode(isa.OP_WAIT, g=int(gpe), imm=mask))

    def wait(self, nodes=(), gpe=False):
        mask = 0
        for x, y in nodes:
            if not (0 <= x < self.nx and 0 <= y < self.ny):
                raise ValueError(f"WAIT node ({x}, {y}) outside the {self.nx}x{self.ny} mesh")
            mask |= 1 << (y * self.nx + x)
        return self.wait_mask(mask, gpe)

    def tmo(self, cycles):
        return self.raw(isa.encode(isa.OP_TMO, imm=cycles))

    def bar(self, bid):
        return self.raw(isa.encode(isa.OP_BAR, imm=bid & 0xFF))


def assemble(text: str, node_mesh=(4, 5), cmd_layout=None) -> list[int]:
    """Text program -> instruction words (errors name the line)."""
    p = Program(node_mesh, cmd_layout)
    for n, line in enumerate(text.splitlines(), 1):
        toks = line.split("#", 1)[0].split()
        if not toks:
            continue
        name, args = toks[0].upper(), toks[1:]
        try:
            if name == "END":
                p.end()
            elif name == "CFG":
                x, y, reg, value = (int(a, 0) for a in args)
                p.cfg(x, y, reg, value)
            elif name == "CMD":
                p.cmd(**{k: int(v, 0) for k, v in (a.split("=", 1) for a in args)})
            elif name == "WAIT":
                gpe = any(a.upper() == "G" for a in args)
                nodes = [tuple(int(v, 0) for v in a.split(",")) for a in args if a.upper() != "G"]
                p.wait(nodes, gpe)
            elif name == "TMO":
                p.tmo(int(args[0], 0))
            elif name == "BAR":
                p.bar(int(args[0], 0))
            else:
                raise ValueError(f"unknown instruction {toks[0]!r}")
        except (ValueError, KeyError, IndexError) as err:
            raise ValueError(f"line {n}: {err}") from None
    return p.words


def assemble_ops(ops, cfg) -> Program:
    """A compiler's op list -> the controller :class:`Program` (the one op -> instruction
    assembly: chiplet and package compilers, the package cycle model and the controller-term
    tests call it).  ``cfg``: the ChipletConfig the program runs on.  Ops: ``("tmo", n)``,
    ``("cfg", (x, y), reg, value)``, ``("wait", nodes, gpe)``, ``("bar", id)``, ``("end",)``,
    ``("recv" | "send" | "group", cmd)`` (cmd: ``.fields(mesh_x)``;
    CMDW only for the chunks that changed).  ``program.op_words[i]`` = words op i
    assembled to.  A command field out of range raises the compiler's ``CompileError``."""
    from tessera.hdl.global_pe.packets import command_layout

    from .compiler import pack_nested
    from .config import node_map
    nm = node_map(cfg)
    lay = command_layout(cfg.gpe)
    prog = Program(nm.mesh, lay)
    prog.op_words = []
    for op in ops:
        n0, k = len(prog.words), op[0]
        if k == "tmo":
            prog.tmo(op[1])
        elif k in ("recv", "send", "group"):
            prog.cmd(pack_nested(lay, op[1].fields(nm.mesh[0])))     # checks every field's width
        elif k == "cfg":
            prog.cfg(op[1][0], op[1][1], op[2], op[3])
        elif k == "wait":
            prog.wait(op[1], op[2])
        elif k == "bar":
            prog.bar(op[1])
        elif k == "end":
            prog.end()
        else:
            raise ValueError(f"unknown op {k!r}")
        prog.op_words.append(len(prog.words) - n0)
    return prog
