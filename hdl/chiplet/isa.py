"""Controller instruction set and status codes (data definitions only).

Shared by the controller RTL (:mod:`.controller`), the assembler
(:mod:`.asm`) and the golden model (:mod:`tessera.golden.controller`); it
holds no logic.  The instruction set is documented in one table in
:mod:`.controller`.

An instruction is one :data:`INST_BITS`-bit word; ``op`` is always bits
[3:0]; the other fields are at fixed offsets ``FIELDS[name] = (offset, width)``
(a field is read only by the opcodes that use it; unused bits must be zero,
the RTL ignores them).
"""
from __future__ import annotations

INST_BITS = 64

OP_END, OP_CFG, OP_CMDW, OP_CMD, OP_WAIT, OP_TMO, OP_BAR = 0, 1, 2, 3, 4, 5, 6
OPCODES = {"END": OP_END, "CFG": OP_CFG, "CMDW": OP_CMDW, "CMD": OP_CMD,
           "WAIT": OP_WAIT, "TMO": OP_TMO, "BAR": OP_BAR}
OP_BITS = 4                       # opcodes 7..15 are illegal (ERR_OP)

FIELDS = {
    "op": (0, 4),
    "x": (4, 3), "y": (7, 3),     # CFG: destination node on this chiplet
    "g": (4, 1),                  # WAIT: also wait for every issued Global PE command
    "k": (4, 4),                  # CMDW: 16-bit chunk index of the command register
    "reg": (16, 16),              # CFG: configuration register address
    "imm": (32, 32),              # CFG value, CMDW chunk (low 16 bits), WAIT node mask,
                                  # TMO cycles, BAR barrier id (low 8 bits)
}
CMD_CHUNK = 16                    # bits written by one CMDW
MAX_NODES = 32                    # WAIT mask = imm (32 bits)

# --- error codes (``err_code``; 0 = no error) -----------------------------------
ERR_NONE, ERR_OP, ERR_NODE, ERR_PC, ERR_TIMEOUT, ERR_ARG, ERR_GPE, ERR_LOAD = range(8)
ERR_BITS = 3
ERR_NAMES = {ERR_NONE: "NONE", ERR_OP: "BAD_OPCODE", ERR_NODE: "BAD_NODE",
             ERR_PC: "PC_OFF_PROGRAM", ERR_TIMEOUT: "TIMEOUT", ERR_ARG: "BAD_ARG",
             ERR_GPE: "GPE_ERROR", ERR_LOAD: "PROGRAM_TOO_LONG"}


def field(word: int, name: str) -> int:
    off, width = FIELDS[name]
    return (word >> off) & ((1 << width) - 1)


def encode(op: int, **fields) -> int:
    word = op & ((1 << OP_BITS) - 1)
    for name, v in fields.items():
        off, width = FIELDS[name]
        if not 0 <= int(v) < (1 << width):
            raise ValueError(f"instruction field {name}={v} does not fit {width} bits")
        word |= int(v) << off
    return word
