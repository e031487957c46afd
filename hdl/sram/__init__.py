"""The shared SRAM wrapper (:mod:`.sram`): not an exported block on its own."""
from .sram import SRAM, srams_of

__all__ = ["SRAM", "srams_of"]
