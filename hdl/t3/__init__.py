"""T3 track & trigger RTL (Pati et al., ASPLOS'24, §4.2-4.5): wavefront Tracker (``tracker``),
DMA trigger table (``dma_table``), memory-controller arbiter (``mca``) and a device node that chains
Tracker -> DMA table (``t3_node``).  Golden models: ``tessera.golden.t3``; testbenches: ``tessera.tb.t3``;
programming from the address-space API: ``tessera.hdl.t3.programming``."""
from tessera.params import Param
from tessera.registry import BlockSpec

from .dma_table import DmaTable
from .mca import MCA
from .node import T3Node
from .tracker import Tracker

_TRACKER_PARAMS = [
    Param("sets", 256, "Tracker sets, indexed by wg_id LSBs (paper: 256)", min=1, max=4096,
          power_of_two=True),
    Param("ways", 8, "ways per set (8 = one per WF of a WG; 19 KB total as in §4.2.1)", min=1, max=16),
    Param("wg_width", 16, "wg_id bits", min=1, max=24),
    Param("wf_width", 3, "wf_id bits (paper: 3, 8 WFs per WG)", min=1, max=4),
    Param("addr_width", 48, "virtual address bits", min=8, max=64),
    Param("count_width", 16, "element-update counter bits", min=2, max=24),
    Param("n_width", 8, "element-count field of an update", min=1, max=16),
    Param("overflow", 4, "fully-associative overflow entries for set conflicts", min=0, max=64),
    Param("trig_depth", 4, "trigger output FIFO depth (+3 + read_latency entries that absorb the "
          "pipeline)", min=1,
          max=64),
    Param("victims", 4, "victim FIFO depth for evicted partial tiles (+3 + read_latency for the "
          "pipeline)", min=1,
          max=64),
    Param("read_latency", 2, "set-memory read latency: 2 = through the block RAM's output register "
          "(one more stage, trigger at t+6; the block RAM's clock-to-out off the logic), 1 = trigger at t+5", min=1, max=2),
]


_DMA_PARAMS = [
    Param("entries", 16, "DMA table entries", min=1, max=256),
    Param("wg_width", 16, "wg_id bits", min=1, max=24),
    Param("wf_width", 3, "wf_id bits", min=1, max=4),
    Param("addr_width", 48, "virtual address bits", min=8, max=64),
    Param("dev_width", 4, "destination device id bits", min=1, max=8),
    Param("tiles_width", 8, "WF tiles per DMA block field", min=1, max=16),
]

_MCA_PARAMS = [
    Param("req_width", 32, "request payload bits (address/command, passed through)", min=1, max=512),
    Param("occ_width", 6, "DRAM command-queue occupancy bits (queue depth < 2**occ_width)", min=1,
          max=16),
    Param("wait_width", 10, "starvation counter bits", min=1, max=24),
    Param("learn_log2", 8, "isolated-compute learning window = 2**learn_log2 cycles", min=0, max=16),
]


# The node's defaults are testbench scale (16 sets x 4 ways): the paper-size Tracker is exported
# and synthesised as ``tracker``; synthesising it twice would double the export test time.
_NODE_DEFAULTS = {"sets": 16, "ways": 4, "wg_width": 8, "addr_width": 24, "count_width": 10,
                  "entries": 8, "dev_width": 2, "tiles_width": 4}
_NODE_PARAMS = [Param(p.name, _NODE_DEFAULTS.get(p.name, p.default), p.help, p.kind, p.min, p.max,
                      p.choices, p.power_of_two)
                for p in _TRACKER_PARAMS + [q for q in _DMA_PARAMS
                                            if q.name not in ("wg_width", "wf_width", "addr_width")]]


def _build_tracker(**p):
    return Tracker(**p)


BLOCKS = [
    BlockSpec(name="tracker", build=_build_tracker, params=_TRACKER_PARAMS,
              doc="T3 wavefront Tracker: set-associative update counting, trigger on threshold, "
                  "eviction on set conflicts (§4.2.1)",
              demo_module="tessera.tb.t3.test_tracker", demo_testcase="tracker_random",
              demo_params={"sets": 8, "ways": 2, "wg_width": 8, "addr_width": 24, "count_width": 10,
                           "overflow": 2, "trig_depth": 2, "victims": 2}),
    BlockSpec(name="dma_table", build=lambda **p: DmaTable(**p), params=_DMA_PARAMS,
              doc="T3 DMA trigger table: tile-range lookup, multi-tile blocks, store/update/none (§4.2.2)",
              demo_module="tessera.tb.t3.test_dma_table", demo_testcase="dma_table_random",
              demo_params={"entries": 8, "wg_width": 8, "addr_width": 24, "dev_width": 2,
                           "tiles_width": 4}),
    BlockSpec(name="t3_node", build=lambda **p: T3Node(**p), params=_NODE_PARAMS,
              doc="T3 device node: Tracker -> DMA trigger table (§4.2)",
              demo_module="tessera.tb.t3.test_ring", demo_testcase="ring_reduce_scatter",
              demo_params={}),
    BlockSpec(name="mca", build=lambda **p: MCA(**p), params=_MCA_PARAMS,
              doc="T3 memory-controller arbiter: RR / compute-first / MCA with threshold, "
                  "starvation limit, dynamic threshold, drain (§4.5)",
              demo_module="tessera.tb.t3.test_mca", demo_testcase="mca_policies",
              demo_params={"req_width": 16, "occ_width": 5, "wait_width": 8, "learn_log2": 4}),
]
