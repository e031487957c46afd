"""Simba processing element (issue 2): vector-MAC array, sequencer, PPU, top."""
from tessera.params import Param
from tessera.registry import BlockSpec

from .chain import PEChain, chain_verilog
from .mult import MULT_IMPLS, SIM_MODELS
from .pe import SimbaPE

PARAMS = [
    Param("K0", 8, "vector MACs (output channels in parallel)", min=1, max=16),
    Param("C0", 8, "lanes per vector MAC (input channels in parallel)", min=1, max=16),
    Param("acc_width", 24, "accumulator / partial-sum width (wraps)", min=17, max=32),
    Param("wbuf_bytes", 32768, "weight buffer bytes", min=1, max=1 << 22),
    Param("ibuf_bytes", 8192, "input buffer bytes", min=1, max=1 << 20),
    Param("abuf_entries", 128, "accumulation buffer entries (x K0 x acc_width)", min=1, max=4096,
          power_of_two=True),
    Param("ppu_depth", 16, "PPU bias/scale entries (max K1 on a LAST/ONLY PE)", min=1, max=256,
          power_of_two=True),
    Param("mac_dsps", 64, "MAC multipliers on DSP blocks (min with K0*C0; the rest in LUTs)",
          min=0, max=256),
    Param("mac_stages", 3, "MAC pipeline registers (1: products+tree in one cycle; 3: products, 2 tree levels, 1 level)", min=1, max=5),
    Param("ppu_mul_stages", 2, "PPU scale-multiply pipeline registers", min=1, max=4),
    Param("mac_operand_reg", True, "operand registers by each multiplier, tree's last level in "
          "accumulate (same cycles; needs mac_stages >= 2)", kind=bool),
    Param("mult_impl", "generic", "MAC multiplier cell: generic (behavioural, simulation/ASIC) or "
          "ecp5 (MULT18X18D with its own registers; needs mac_operand_reg; the ECP5 flow "
          "tessera.synth selects it)", kind=str, choices=MULT_IMPLS),
]



def sim_models(params: dict) -> dict:
    """Manifest entry: the vendor primitives the Verilog instantiates (``mult_impl``) and the
    behavioural models a simulator needs besides the Verilog (never give them to synthesis)."""
    impl = params.get("mult_impl", "generic")
    if not SIM_MODELS[impl]:
        return {}
    return {"vendor_cells": ["MULT18X18D"],
            "sim_models": [f"hdl/pe/{f.name}" for f in SIM_MODELS[impl]]}


BLOCKS = [
    BlockSpec("pe", SimbaPE, PARAMS,
              doc="Simba PE: K0xC0 int8 vector MACs, weight-stationary, psum chain, PPU",
              extra_manifest=sim_models,
              demo_module="tessera.tb.pe.test_pe", demo_testcase="demo"),
]

BLOCKS.append(
    BlockSpec("pe_chain", PEChain,
              [Param("n", 3, "PEs in the reduction chain", min=1, max=16)]
              + [Param("mac_dsps", 32, "MAC multipliers per PE on DSP blocks (3 x (32 + 16 "
                       "PPU) <= an ECP5-85k's 156; the rest in LUTs)", min=0, max=256)
                 if q.name == "mac_dsps" else q for q in PARAMS],
              doc="N Simba PEs chained for cross-PE reduction (PE module emitted once)",
              verilog=chain_verilog,
              extra_manifest=lambda params: {"leaf_modules": ["pe"], "instances": params["n"],
                                             **sim_models(params)},
              demo_module="tessera.tb.pe.test_pe_chain", demo_testcase="demo"))
