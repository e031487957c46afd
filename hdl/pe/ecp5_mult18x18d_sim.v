// Behavioural simulation model of the Lattice ECP5 MULT18X18D, only as far as
// tessera.hdl.pe.mult.RegMult (impl "ecp5") uses it: 18x18 multiply with
// SIGNEDA/SIGNEDB, optional input A/B registers (REG_INPUTA_CLK/REG_INPUTB_CLK),
// pipeline register (REG_PIPELINE_CLK) and output register (REG_OUTPUT_CLK),
// all on CLK0/CE0/RST0 with a synchronous reset to 0 (RESETMODE "SYNC"),
// registers 0 at time 0 (as after GSR).  Written for this project because
// Yosys's ecp5/cells_sim.v has no MULT18X18D model (cells_bb.v: black box only).
// Simulation only: never give this file to synthesis (the primitive is the
// vendor's).  Not modelled: CLK1-3/CE1-3/RST1-3 selection, C input, shift
// chains (SRIA/SRIB, SOURCEA/SOURCEB must be 0), ROA/ROB/ROC, SIGNEDP,
// asynchronous reset, MULT_BYPASS, cascading into ALU54B.
module MULT18X18D #(
    parameter REG_INPUTA_CLK = "NONE",
    parameter REG_INPUTB_CLK = "NONE",
    parameter REG_PIPELINE_CLK = "NONE",
    parameter REG_OUTPUT_CLK = "NONE",
    parameter RESETMODE = "SYNC"
) (
    input A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17,
    input B0, B1, B2, B3, B4, B5, B6, B7, B8, B9, B10, B11, B12, B13, B14, B15, B16, B17,
    /* verilator lint_off UNUSEDSIGNAL */
    input C0, C1, C2, C3, C4, C5, C6, C7, C8, C9, C10, C11, C12, C13, C14, C15, C16, C17,
    input SOURCEA, SOURCEB,
    /* verilator lint_on UNUSEDSIGNAL */
    input SIGNEDA, SIGNEDB,
    input CLK0, CE0, RST0,
    output P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, P10, P11, P12, P13, P14, P15, P16, P17,
    output P18, P19, P20, P21, P22, P23, P24, P25, P26, P27, P28, P29, P30, P31, P32, P33,
    output P34, P35
);
    // only what RegMult uses is modelled: stop on anything else
    initial begin
        if (RESETMODE != "SYNC") $fatal(1, "MULT18X18D model: only RESETMODE \"SYNC\"");
    end
    wire [17:0] a = {A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0};
    wire [17:0] b = {B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0};
    reg [17:0] a_q = 18'd0, b_q = 18'd0;
    reg sa_q = 1'b0, sb_q = 1'b0;
    reg [35:0] pipe_q = 36'd0, out_q = 36'd0;

    always @(posedge CLK0) begin
        if (RST0) begin
            a_q <= 18'd0; b_q <= 18'd0; sa_q <= 1'b0; sb_q <= 1'b0;
        end else if (CE0) begin
            a_q <= a; b_q <= b; sa_q <= SIGNEDA; sb_q <= SIGNEDB;
        end
    end
    wire [17:0] a_m = (REG_INPUTA_CLK == "NONE") ? a : a_q;
    wire [17:0] b_m = (REG_INPUTB_CLK == "NONE") ? b : b_q;
    wire sa_m = (REG_INPUTA_CLK == "NONE") ? SIGNEDA : sa_q;
    wire sb_m = (REG_INPUTB_CLK == "NONE") ? SIGNEDB : sb_q;
    // each operand extended to 36 bits by its own sign flag; the product mod 2**36 is exact
    wire [35:0] a_x = {{18{sa_m & a_m[17]}}, a_m};
    wire [35:0] b_x = {{18{sb_m & b_m[17]}}, b_m};
    wire [35:0] prod = a_x * b_x;
    wire [35:0] p_pipe = (REG_PIPELINE_CLK == "NONE") ? prod : pipe_q;

    always @(posedge CLK0) begin
        if (RST0) begin
            pipe_q <= 36'd0; out_q <= 36'd0;
        end else if (CE0) begin
            pipe_q <= prod; out_q <= p_pipe;
        end
    end
    wire [35:0] p = (REG_OUTPUT_CLK == "NONE") ? p_pipe : out_q;
    assign {P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20,
            P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2,
            P1, P0} = p;
endmodule
