"""cocotb testbench of the Simba PE."""
