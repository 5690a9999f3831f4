"""bsarec's embedded padding computes what BSARec's code computes over a left-padded window."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812

from model.build import build_query_tower
from model.towers.bsarec import BsarecTower

N_ITEMS, DIM, L, CUTOFF = 30, 16, 10, 5
WHOLE = {"name": "bsarec", "window": "whole", "cutoff": CUTOFF}


def _tower(padding: str) -> BsarecTower:
    torch.manual_seed(0)
    cfg = {"tower": {**WHOLE, "padding": padding}, "dim": DIM, "max_len": L, "normalize": False}
    tower = build_query_tower(cfg, N_ITEMS).eval()
    assert isinstance(tower, BsarecTower)
    return tower


def _bsarec_code(tower: BsarecTower, seq: torch.Tensor) -> torch.Tensor:
    """BSARec's arithmetic written out (one head, eval): rfft low-pass, an additive -10000 mask."""
    x = tower.inputs.norm(tower.item_embedding(seq) + tower.inputs.positions.weight)
    allowed = torch.ones(L, L, dtype=torch.bool).tril() & (seq != 0).unsqueeze(1)
    additive = (~allowed).float() * -10000.0  # a row with no allowed key: every key shifted alike
    for block in tower.blocks:
        spectrum = torch.fft.rfft(x, dim=1, norm="ortho")
        spectrum[:, CUTOFF // 2 + 1 :] = 0
        low = torch.fft.irfft(spectrum, n=L, dim=1, norm="ortho")
        dsp = block.norm_dsp(x + low + block.sqrt_beta**2 * (x - low))
        q, k, v = F.linear(x, block.attn.in_proj_weight, block.attn.in_proj_bias).chunk(3, dim=-1)
        weights = (q @ k.transpose(1, 2) / math.sqrt(DIM) + additive).softmax(dim=-1)
        gsp = block.norm_gsp(x + block.attn.out_proj(weights @ v))
        x = block.ffn(block.alpha * dsp + (1 - block.alpha) * gsp)
    return x


def _padded() -> torch.Tensor:
    seq = torch.randint(1, N_ITEMS + 1, (3, L), generator=torch.Generator().manual_seed(1))
    seq[0, :6] = 0
    seq[1, :9] = 0  # a single item
    return seq


def test_embedded_padding_is_bsarecs_code_at_every_item_position() -> None:
    tower, seq = _tower("embedded"), _padded()
    with torch.no_grad():
        expected = _bsarec_code(tower, seq)
        real = seq != 0
        assert torch.allclose(tower(seq)[real], expected[real], atol=1e-4)
        assert torch.allclose(tower.encode(seq[:2, 6:]), expected[:2, -1], atol=1e-4)  # widened
        zeroed = _tower("zero")  # the same weights with zero padding
        assert not torch.allclose(zeroed.encode(seq)[:2], expected[:2, -1], atol=1e-3)


def test_a_full_window_has_no_padding_to_embed() -> None:
    seq = torch.randint(1, N_ITEMS + 1, (4, L), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert torch.allclose(_tower("embedded")(seq), _tower("zero")(seq), atol=1e-5)


def test_a_padded_position_sees_the_later_items() -> None:
    tower, seq = _tower("embedded"), _padded()
    changed = seq.clone()
    changed[0, -1] = 1 + seq[0, -1] % N_ITEMS
    with torch.no_grad():
        body = [tower.blocks[0]]
        before, after = tower._below(seq, body)[0], tower._below(changed, body)[0]
    assert not torch.allclose(before[0, :6], after[0, :6], atol=1e-4)  # padded rows changed


def test_embedded_padding_keeps_the_causal_low_pass_it_is_given() -> None:
    tower = {"name": "bsarec", "padding": "embedded", "window": "causal"}
    cfg = {"tower": tower, "dim": DIM, "max_len": L}
    block = build_query_tower(cfg, N_ITEMS).blocks[0]
    assert torch.equal(block.low_pass, block.low_pass.tril())  # no later position's tap
    assert not torch.equal(_tower("embedded").blocks[0].low_pass.triu(1), torch.zeros(L, L))
