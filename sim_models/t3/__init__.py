"""T3 (Pati et al., ASPLOS'24) system model: fused GEMM + ring reduce-scatter with track & trigger,
near-memory reductions (NMC) and memory-controller arbitration (MCA).  See ``address_space`` (§4.4),
``model`` (§5-6) and ``cli``."""
