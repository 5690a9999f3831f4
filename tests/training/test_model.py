"""Towers: shapes, normalisation, causality, padding, sharing, self-contained query state."""

import pytest
import torch

from model.build import build_model, build_query_tower
from model.config import ModelConfig
from model.towers import FastDropout, MeanPoolTower, SasrecTower, TowerShape
from model.towers.base import BlockTower, PositionalInput
from model.towers.sasrec import SasrecSettings

CAUSAL_BSAREC = {"name": "bsarec", "window": "causal"}  # its default filters the whole window
TOWERS: list[str | dict[str, str]] = ["sasrec", "mean", "fmlp", CAUSAL_BSAREC, "lru"]
WHOLE_WINDOW = {"name": "bsarec", "window": "whole"}  # not causal: trained at the last position
EMBEDDED = {**WHOLE_WINDOW, "padding": "embedded"}  # BSARec's code: padded rows carried along

N_ITEMS, DIM, L = 30, 16, 8


def _seq(batch: int = 4, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    seq = torch.randint(1, N_ITEMS + 1, (batch, L), generator=gen)
    seq[0, :3] = 0  # left padding
    seq[1, : L - 1] = 0  # a single item
    return seq


TWO_HEADS_ONE_BLOCK = {"name": "bsarec", "num_heads": 2, "num_layers": 1}  # last() alone


@pytest.mark.parametrize("tower", [*TOWERS, WHOLE_WINDOW, EMBEDDED, TWO_HEADS_ONE_BLOCK])
def test_shapes_and_unit_norm(tower: str | dict[str, object]) -> None:
    model = build_query_tower(
        {"tower": tower, "dim": DIM, "max_len": L, "normalize": True}, N_ITEMS
    ).eval()
    out = model(_seq())
    assert out.shape == (4, L, DIM)
    assert torch.isfinite(out).all()
    real = (_seq() != 0).float()
    assert torch.allclose(out.norm(dim=-1), real, atol=1e-5)  # padded positions are zeros
    enc = model.encode(_seq())
    assert enc.shape == (4, DIM)
    assert torch.allclose(enc, out[:, -1])


@pytest.mark.parametrize("tower", TOWERS)
def test_plain_dot_product_towers_are_the_normalised_ones_before_normalising(
    tower: str | dict[str, str],
) -> None:
    cfg = {"tower": tower, "dim": DIM, "max_len": L, "normalize": True}
    torch.manual_seed(0)
    unit = build_model(cfg, N_ITEMS).eval()
    torch.manual_seed(0)
    plain = build_model({**cfg, "normalize": False}, N_ITEMS).eval()
    seq, items = _seq(), torch.arange(N_ITEMS + 1)
    with torch.no_grad():
        h, c = plain.query_tower(seq), plain.item_tower(items)
        norms = h.norm(dim=-1)
        real = seq != 0
        assert not torch.allclose(norms[real], torch.ones_like(norms[real]), atol=1e-2)
        assert torch.allclose(torch.nn.functional.normalize(h, dim=-1), unit.query_tower(seq))
        assert torch.allclose(plain.item_tower.all_embeddings(), c)
        assert torch.equal(c, plain.item_tower.embedding.weight)  # the raw table, row 0 zeros
        assert torch.allclose(torch.nn.functional.normalize(c, dim=-1), unit.item_tower(items))


@pytest.mark.parametrize("tower", TOWERS)
def test_causal_output_ignores_later_items(tower: str | dict[str, str]) -> None:
    torch.manual_seed(0)
    model = build_query_tower({"tower": tower, "dim": DIM, "max_len": L}, N_ITEMS).eval()
    seq = _seq(seed=1)
    seq[0] = torch.arange(1, L + 1)
    changed = seq.clone()
    changed[0, 5:] = torch.tensor([20, 21, 22])
    a, b = model(seq), model(changed)
    assert torch.allclose(a[0, :5], b[0, :5], atol=1e-6)
    assert not torch.allclose(a[0, 5:], b[0, 5:], atol=1e-3)


def test_a_block_tower_of_plain_modules_encodes_its_last_position() -> None:
    class Doubling(torch.nn.Module):  # a plugin tower's block that is no SequenceBlock
        def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
            return 2 * x.cumsum(dim=1)

    tower = BlockTower(TowerShape(N_ITEMS, DIM, L))
    tower.inputs = PositionalInput(DIM, L, 0.0)
    tower.blocks.extend([Doubling(), Doubling()])
    with torch.no_grad():
        assert torch.allclose(tower.encode(_seq()), tower(_seq())[:, -1], atol=1e-6)


def test_the_whole_window_low_pass_lets_earlier_positions_see_later_items() -> None:
    torch.manual_seed(0)
    model = build_query_tower({"tower": WHOLE_WINDOW, "dim": DIM, "max_len": L}, N_ITEMS).eval()
    seq = torch.arange(1, L + 1).unsqueeze(0)
    changed = seq.clone()
    changed[0, -1] = 20
    assert not torch.allclose(model(seq)[0, :-1], model(changed)[0, :-1], atol=1e-3)


@pytest.mark.parametrize("name", [*TOWERS, WHOLE_WINDOW, EMBEDDED])
def test_padding_is_ignored_whatever_the_pad_length(name: str | dict[str, str]) -> None:
    torch.manual_seed(0)
    tower = build_query_tower({"tower": name, "dim": DIM, "max_len": L}, N_ITEMS).eval()
    history = torch.tensor([[0, 0, 0, 0, 0, 3, 7, 9]])
    short = torch.tensor([[3, 7, 9]])  # encode() left-pads it to the same history
    assert torch.allclose(tower.encode(history), tower.encode(short), atol=1e-6)
    other = torch.tensor([[0, 0, 0, 0, 12, 3, 7, 9]])
    assert not torch.allclose(tower.encode(history), tower.encode(other), atol=1e-4)
    longer = torch.tensor([[5, 5, 5, 5, 5, 5, 0, 0, 0, 0, 0, 3, 7, 9]])  # cut to last L
    assert torch.allclose(tower.encode(history), tower.encode(longer), atol=1e-6)


@pytest.mark.parametrize("name", [*TOWERS, WHOLE_WINDOW, EMBEDDED])
def test_padding_rows_of_the_id_table_do_not_affect_items(name: str | dict[str, str]) -> None:
    torch.manual_seed(0)
    tower = build_query_tower({"tower": name, "dim": DIM, "max_len": L}, N_ITEMS).eval()
    seq = torch.tensor([[0, 0, 0, 0, 0, 3, 7, 9]])
    base = tower(seq)[0, 5:]
    with torch.no_grad():
        tower.item_embedding.weight[0].normal_()  # garbage in the padding row
    assert torch.allclose(tower(seq)[0, 5:], base, atol=1e-6)


def test_mean_pool_is_running_mean_of_non_padding() -> None:
    tower = build_query_tower(
        {"tower": "mean", "dim": DIM, "max_len": L, "normalize": True}, N_ITEMS
    )
    assert isinstance(tower, MeanPoolTower)
    with torch.no_grad():
        tower.proj.weight.copy_(torch.eye(DIM))
        tower.proj.bias.zero_()
    seq = torch.tensor([[0, 0, 4, 6]])
    emb = tower.item_embedding.weight
    expected = torch.nn.functional.normalize((emb[4] + emb[6]) / 2, dim=0)
    assert torch.allclose(tower(seq)[0, -1], expected, atol=1e-6)


def test_shared_embeddings_and_self_contained_state() -> None:
    cfg = ModelConfig(dim=DIM, max_len=L, share_embeddings=True)
    model = build_model(cfg, N_ITEMS)
    assert model.item_tower.embedding is model.query_tower.item_embedding
    assert len(model.embedding_parameters()) == 1
    state = model.query_tower.state_dict()
    assert "item_embedding.weight" in state
    fresh = build_query_tower(cfg.model_dump(), N_ITEMS)
    fresh.load_state_dict(state)
    model.eval()
    fresh.eval()
    assert torch.allclose(fresh.encode(_seq()), model.query_tower.encode(_seq()))
    unshared = build_model(ModelConfig(dim=DIM, max_len=L, share_embeddings=False), N_ITEMS)
    assert unshared.item_tower.embedding is not unshared.query_tower.item_embedding
    assert len(unshared.embedding_parameters()) == 2


def test_item_tower_table_normalised_with_zero_padding_row() -> None:
    model = build_model(ModelConfig(dim=DIM, max_len=L, normalize=True), N_ITEMS)
    table = model.item_tower.all_embeddings()
    assert table.shape == (N_ITEMS + 1, DIM)
    assert torch.all(table[0] == 0)
    assert torch.allclose(table[1:].norm(dim=-1), torch.ones(N_ITEMS), atol=1e-5)


def test_gradients_flow_and_padding_row_stays_zero() -> None:
    model = build_model(ModelConfig(dim=DIM, max_len=L), N_ITEMS)
    out = model.query_tower(_seq())
    loss = (out[:, -1] * model.item_tower(torch.tensor([1, 2, 3, 4]))).sum()
    loss.backward()
    grad = model.item_embedding_weight.grad
    assert grad is not None and torch.all(grad[0] == 0)
    assert grad[1:].abs().sum() > 0


def test_fast_dropout_keeps_the_expectation_and_is_identity_in_eval() -> None:
    drop = FastDropout(0.5)
    x = torch.ones(200_000)
    out = drop(x)
    zeros = float((out == 0).float().mean())
    assert abs(zeros - 0.5) < 0.01 and set(out.unique().tolist()) == {0.0, 2.0}
    assert abs(float(out.mean()) - 1.0) < 0.02
    drop.eval()
    assert torch.equal(drop(x), x)
    with pytest.raises(ValueError, match="dropout"):
        FastDropout(1.0)


def test_ffn_dim_sets_the_feed_forward_width_and_a_bundle_without_it_keeps_dim() -> None:
    wide = SasrecTower(SasrecSettings(ffn_dim=64), TowerShape(N_ITEMS, DIM, L))
    for block in wide.blocks:
        assert block.ffn[0].weight.shape == (64, DIM)
        assert block.ffn[-1].weight.shape == (DIM, 64)
    old_manifest = {"tower": "sasrec", "dim": DIM, "max_len": L}  # written before the key
    plain = build_query_tower(old_manifest, N_ITEMS)
    assert plain.blocks[0].ffn[0].weight.shape == (DIM, DIM)
    assert wide(_seq()).shape == plain(_seq()).shape == (4, L, DIM)


@pytest.mark.parametrize("tower", ["bsarec", "sasrec", "fmlp", "lru", "mean"])
def test_init_std_initialises_as_the_published_code(tower: str) -> None:
    torch.manual_seed(0)
    model = build_model(ModelConfig(tower=tower, dim=64, init_std=0.02), num_items=500)
    for part in model.modules():
        weights = [getattr(part, "weight", None), getattr(part, "in_proj_weight", None)]
        if isinstance(part, torch.nn.Linear | torch.nn.Embedding | torch.nn.MultiheadAttention):
            for weight in (w for w in weights if w is not None):
                rows = weight[1:] if isinstance(part, torch.nn.Embedding) else weight
                assert abs(rows.std().item() - 0.02) < 0.004, part
        if isinstance(part, torch.nn.LayerNorm):
            assert torch.equal(part.weight, torch.ones_like(part.weight))
        for name in ("bias", "in_proj_bias"):
            bias = getattr(part, name, None)
            if isinstance(bias, torch.nn.Parameter):
                assert not bias.any(), (part, name)
    assert not model.item_embedding_weight[0].any()  # the padding row
    plain = build_model(ModelConfig(tower=tower, dim=64, init_std=None), num_items=500)
    assert abs(plain.item_embedding_weight[1:].std().item() - 64**-0.5) < 0.01
