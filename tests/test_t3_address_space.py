"""T3 address-space configuration (§4.4, Figs 7, 11, 12): the 4-GPU example of the paper, tile
arithmetic, and a functional replay that executes the programmed remote/DMA updates on real data and
checks that ring reduce-scatter semantics (each device ends with the full sum of one chunk) and the
tracker thresholds (exactly reached, never exceeded) hold."""
import numpy as np
import pytest

from tessera.sim_models.t3.address_space import (OP_UPDATE, OutputLayout, configure_gemm_rs,
                                                  stagger_order, wf_tile_segments)


def test_paper_four_gpu_example():
    # Fig 7 / Fig 11: 4 GPUs, 4 stages; GPU-0 remote-maps stage-1 to GPU-3, DMA-maps stage-2,3,
    # stage-4 is written locally only.
    cfg = configure_gemm_rs(256, 256, (64, 64), (32, 32), stages=4, n_devices=4)
    g0 = cfg.devices[0]
    assert g0.chunk_order.tolist() == [0, 1, 2, 3]
    assert [(r.chunk, r.dst_device, r.op) for r in g0.remote_maps] == [(0, 3, OP_UPDATE)]
    assert [(m.chunk, m.dst_device, m.updates_per_element) for m in g0.dma_maps] == \
        [(1, 3, 2), (2, 3, 2)]
    assert g0.final_chunk == 3
    assert [s for s in g0.stage_chunks] == [(0,), (1,), (2,), (3,)]
    # staggered by one stage: in step 1 GPU-1 runs stage-2, GPU-2 stage-3, ...
    assert [cfg.devices[d].stage_chunks[0] for d in range(4)] == [(0,), (1,), (2,), (3,)]
    assert cfg.devices[1].chunk_order.tolist() == [1, 2, 3, 0]
    # each device ends owning a different chunk
    assert sorted(dv.final_chunk for dv in cfg.devices) == [0, 1, 2, 3]
    # 16 WG tiles, 4 per chunk; 4 WFs per WG of 32x32 = 1024 elements -> threshold 2048
    assert cfg.chunk_wg_bounds.tolist() == [0, 4, 8, 12, 16]
    assert g0.tracker.nominal_threshold == 2048
    assert set(g0.tracker.threshold.tolist()) == {2048}
    assert len(g0.tracker) == 3 * 4 * 4          # chunks 1..3 tracked, chunk 0 not
    assert len(g0.dma_table) == 2 * 4 * 4        # granularity 1: one block per WF tile
    assert set(g0.tracker.chunk.tolist()) == {1, 2, 3}
    assert (g0.tracker.dma_entry[g0.tracker.chunk == 3] == -1).all()


def test_stagger_order_is_latin_square():
    o = stagger_order(5)
    assert o[2].tolist() == [2, 3, 4, 0, 1]
    for s in range(5):
        assert sorted(o[:, s].tolist()) == list(range(5))
    with pytest.raises(ValueError, match="n_devices"):
        stagger_order(1)


def test_tile_addresses_column_major():
    lay = OutputLayout(100, 70, (32, 32), (16, 32))
    assert lay.wg_grid == (4, 3) and lay.n_wg == 12 and lay.wf_per_wg == 2
    # WG 5 = row-block 1, col-block 2; WF 1 = lower half
    r0, c0, rr, cc = (int(x) for x in lay.wf_tile_box(5, 1))
    assert (r0, c0, rr, cc) == (48, 64, 16, 6)       # clipped at column 70
    segs = wf_tile_segments(lay, 5, 1, base=0x1000)
    assert len(segs) == 6
    assert segs[0] == (0x1000 + (64 * 100 + 48) * 2, 32)
    assert segs[1][0] - segs[0][0] == 200            # next column: +M elements
    # the bottom row of WG tiles is clipped to 100 - 96 = 4 rows; WF 1 there is empty
    assert int(np.prod(lay.wf_tile_box(9, 0)[2:])) == 4 * 32
    assert int(np.prod(lay.wf_tile_box(9, 1)[2:])) == 0


def test_threshold_and_sets():
    cfg = configure_gemm_rs(2048, 1024, (128, 128), (64, 32), stages=8, n_devices=8)
    t = cfg.devices[3].tracker
    assert t.nominal_threshold == 64 * 32 * 2
    assert (t.set_index == t.wg_id % 256).all() and (t.tag_wg_msb == t.wg_id // 256).all()
    assert t.wf_id.max() == 7


def test_dma_granularity_blocks():
    cfg = configure_gemm_rs(512, 256, (64, 64), (32, 32), stages=4, n_devices=4,
                            dma_granularity=3)
    d = cfg.devices[2]
    tab = d.dma_table
    # each DMA'd chunk has 8 WGs * 4 WFs = 32 WF tiles -> blocks of 3,3,...,2
    for c in (3, 0):
        nt = tab.n_wf_tiles[tab.chunk == c]
        assert nt.tolist() == [3] * 10 + [2]
    assert (tab.bytes == tab.n_wf_tiles * 32 * 32 * 2).all()
    assert (tab.dst_device == 1).all()
    # every tracked tile of a DMA'd chunk points at a block of that chunk
    e = d.tracker.dma_entry
    assert (tab.chunk[e[e >= 0]] == d.tracker.chunk[e >= 0]).all()


def test_buffer_bases_translate():
    bases = [0x10000 * (i + 1) for i in range(4)]
    cfg = configure_gemm_rs(256, 256, (64, 64), (32, 32), stages=4, n_devices=4,
                            buffer_base=bases)
    tab = cfg.devices[1].dma_table
    assert ((tab.src_va - bases[1]) == (tab.dst_va - bases[0])).all()
    assert cfg.devices[1].remote_maps[0].dst_base == bases[0]


@pytest.mark.parametrize("kw,match", [
    (dict(n_devices=1), "n_devices"),
    (dict(stages=0), "stages"),
    (dict(wf_tile=(48, 32)), "divide"),
    (dict(wf_tile=(16, 16)), "3 bits"),
    (dict(buffer_base=[0, 1]), "buffer_base"),
    (dict(dma_granularity=0), "dma_granularity"),
])
def test_bad_parameters(kw, match):
    args = dict(m=256, n=256, wg_tile=(64, 64), wf_tile=(32, 32), stages=4, n_devices=4)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        configure_gemm_rs(**args)


@pytest.mark.parametrize("m,n,nd,stages,gran", [
    (256, 256, 4, 4, 1), (200, 150, 4, 6, 2), (384, 128, 3, 2, 5), (128, 96, 2, 3, 1),
    (520, 260, 8, 11, 4)])
def test_replay_reduces_scatter(m, n, nd, stages, gran):
    """Execute the configuration: GEMM stores of slot s, then the DMAs the tracker triggers."""
    cfg = configure_gemm_rs(m, n, (64, 32), (32, 16), stages=stages, n_devices=nd,
                            dma_granularity=gran)
    lay = cfg.layout
    rng = np.random.default_rng(1)
    partial = rng.integers(-50, 50, size=(nd, m, n))     # each device's partial GEMM output
    mem = np.zeros((nd, m, n), dtype=np.int64)           # zero-initialised output buffers
    counts = [np.zeros(len(dv.tracker), dtype=np.int64) for dv in cfg.devices]

    def rows_of(dv, wg):                                  # tracker rows of one WG
        return np.flatnonzero(dv.tracker.wg_id == wg)

    def apply(dst, src_vals, wg, wf):
        r0, c0, rr, cc = (int(x) for x in lay.wf_tile_box(wg, wf))
        mem[dst, r0:r0 + rr, c0:c0 + cc] += src_vals[r0:r0 + rr, c0:c0 + cc]
        dv = cfg.devices[dst]
        hit = np.flatnonzero((dv.tracker.wg_id == wg) & (dv.tracker.wf_id == wf))
        if hit.size:
            counts[dst][hit[0]] += rr * cc

    for s in range(nd):
        for d, dv in enumerate(cfg.devices):
            c = int(dv.chunk_order[s])
            lo, hi = cfg.chunk_wg_bounds[c], cfg.chunk_wg_bounds[c + 1]
            remote = {r.chunk: r for r in dv.remote_maps}
            for wg in range(lo, hi):
                for wf in range(lay.wf_per_wg):
                    target = remote[c].dst_device if c in remote else d
                    apply(target, partial[d], wg, wf)
        # after slot s's local stores and incoming updates: triggered DMAs of slot-s chunks
        snap = mem.copy()
        for d, dv in enumerate(cfg.devices):
            t = dv.tracker
            c = int(dv.chunk_order[s])
            rows = np.flatnonzero(t.chunk == c)
            if s == 0:
                assert rows.size == 0
                continue
            assert (counts[d][rows] == t.threshold[rows]).all()   # exactly reached
            for e in np.unique(t.dma_entry[rows]):
                if e < 0:
                    continue
                blk = np.flatnonzero(t.dma_entry == e)
                assert blk.size == dv.dma_table.n_wf_tiles[e]
                for i in blk:
                    apply(int(dv.dma_table.dst_device[e]), snap[d], int(t.wg_id[i]),
                          int(t.wf_id[i]))
    total = partial.sum(axis=0)
    for d, dv in enumerate(cfg.devices):
        c = dv.final_chunk
        lo, hi = cfg.chunk_wg_bounds[c], cfg.chunk_wg_bounds[c + 1]
        for wg in range(lo, hi):
            for wf in range(lay.wf_per_wg):
                r0, c0, rr, cc = (int(x) for x in lay.wf_tile_box(wg, wf))
                np.testing.assert_array_equal(mem[d, r0:r0 + rr, c0:c0 + cc],
                                              total[r0:r0 + rr, c0:c0 + cc])
        assert (counts[d] <= dv.tracker.threshold).all()
