"""placeholder"""
from __future__ import annotations


def package_arch(tg, bench_dir=None):
    """The Simba model's Arch for the package ``tg``: ckx x cky chiplets of ``tg.chiplet``."""
    from .chiplet_cycles import chiplet_arch
    a = chiplet_arch(tg.chiplet, bench_dir)
    return a.with_(mesh_rows=tg.cky, mesh_cols=tg.ckx)
