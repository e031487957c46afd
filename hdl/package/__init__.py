"""Simba package (issue 18): chiplets over the NoP.  Block ``package`` (:mod:`.package`);
parameters and the chiplet/NoP map in :mod:`.config`."""
from __future__ import annotations

BLOCKS = []
