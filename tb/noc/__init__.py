"""cocotb testbenches of the NoC router, mesh and two-level system (issue 3)."""
