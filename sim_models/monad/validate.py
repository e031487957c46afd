"""Independent cycle-level reference for the Monad compute model (paper §V-A).

The paper validates its model against SCALE-Sim [23]; ``scalesim_cycles`` runs
the PyPI ``scalesim`` package (output-stationary 8x8 array by default) on GEMM
layers and returns its compute cycles (column "Total Cycles", prefetch
excluded, matching the model's double-buffering assumption).  Only the PE
array is simulated: the package network and DRAM are not.
"""
from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path

SCALESIM_CFG = """[general]
run_name = monad_val

[architecture_presets]
ArrayHeight: 8
ArrayWidth: 8
IfmapSramSzkB: 1024
FilterSramSzkB: 1024
OfmapSramSzkB: 1024
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth : 10
Dataflow : os
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: CALC
UseRamulatorTrace: False
"""


def scalesim_cycles(gemms, rows: int = 8, cols: int = 8):
    """Cycle-level SCALE-Sim (PyPI ``scalesim``) output-stationary array: cycles per GEMM (M, N, K).

    Identical GEMMs are simulated once (the simulation is deterministic), and
    SCALE-Sim's per-cycle tqdm progress bars are disabled (``TQDM_DISABLE``,
    read when tqdm is first imported): they took a quarter of its run time."""
    gemms = [tuple(g) for g in gemms]
    uniq = list(dict.fromkeys(gemms))
    if len(uniq) < len(gemms):
        got = dict(zip(uniq, scalesim_cycles(uniq, rows, cols)))
        return [got[g] for g in gemms]
    os.environ.setdefault("TQDM_DISABLE", "1")
    from scalesim.scale_sim import scalesim
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "c.cfg").write_text(SCALESIM_CFG.replace("ArrayHeight: 8", f"ArrayHeight: {rows}")
                                   .replace("ArrayWidth: 8", f"ArrayWidth: {cols}"))
        (d / "t.csv").write_text("Layer, M, N, K,\n" + "".join(f"l{i}, {m}, {n}, {k},\n"
                                                             for i, (m, n, k) in enumerate(gemms)))
        (d / "l.csv").write_text("Layer, a, b, c, d, e, f, g, h, i,\n" + "".join(
            f"l{i}, 1, 1, 1, 1, 1, 1, 1, 1, 1,\n" for i in range(len(gemms))))
        with contextlib.redirect_stdout(io.StringIO()):
            s = scalesim(save_disk_space=True, verbose=False, config=str(d / "c.cfg"), topology=str(d / "t.csv"),
                         layout=str(d / "l.csv"), input_type_gemm=True)
            s.run_scale(top_path=str(d / "out"))
        rows = (d / "out" / "monad_val" / "COMPUTE_REPORT.csv").read_text().strip().splitlines()[1:]
        return [int(r.split(",")[2]) for r in rows]
