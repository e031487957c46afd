"""T3 (Pati et al., ASPLOS'24) system model: fused GEMM + ring reduce-scatter with track & trigger,
near-memory reductions (NMC) and memory-controller arbitration (MCA).

Modules (import nothing heavy here; ``address_space`` is numpy-only and shared with the T3 RTL):

* ``address_space`` - remote_map / dma_map configuration, Tracker programming, DMA table (§4.4)
* ``config``        - Table 1 / Table 2 data (``data/*.json``, every number with its source)
* ``gemm``          - sub-layer GEMM shapes, WG stages, roofline + L2 reuse per stage (§2.5, §5.2)
* ``collectives``   - ring RS / AG / AR, alpha-beta + DRAM traffic, bus bandwidth (§2.3, §4.3)
* ``dram``          - channel-level DRAM + MC queue (FR-FCFS, bank groups, NMC tCCDWL, turnaround) and the
                      compute/communication arbiter (rr / compute_first / mca, RTL semantics), cycle loop
* ``overlap``       - fused GEMM-RS simulation on ``dram`` (one GPU, ring symmetry)
* ``study``         - the five configurations of §5.3 for one sub-layer
* ``e2e``           - end-to-end layer time and speedups (Fig 4, Fig 19)
* ``tracker_ref``   - cycle-level Tracker reference used to cross-check the model's triggers
* ``plots``, ``cli`` - figures and ``tessera t3``; ``bench/t3_repro.py`` reproduces §6.
"""
