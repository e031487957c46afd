"""Chiplet fabrication cost model (Monad §II-B, Eq. 1); see ``model``."""
