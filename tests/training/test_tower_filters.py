"""The frequency-domain and recurrent towers compute what their papers say, causally."""

from __future__ import annotations

import torch

from model.towers.filters import (
    apply_operator,
    causal_conv,
    circular_taps,
    low_pass_operator,
    low_pass_taps,
)
from model.towers.lru import Recurrence

B, L, C = 3, 12, 5


def _reference_conv(x: torch.Tensor, taps: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for t in range(x.shape[1]):
        for j in range(min(t + 1, taps.shape[0])):
            out[:, t] += taps[j] * x[:, t - j]
    return out


def test_causal_conv_is_the_direct_sum_for_real_and_complex_inputs() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(B, L, C, generator=gen)
    taps = torch.randn(L, C, generator=gen)
    assert torch.allclose(causal_conv(x, taps), _reference_conv(x, taps), atol=1e-5)
    z = torch.complex(x, torch.randn(B, L, C, generator=gen))
    ztaps = torch.complex(taps, torch.randn(L, C, generator=gen))
    assert torch.allclose(causal_conv(z, ztaps), _reference_conv(z, ztaps), atol=1e-4)
    short = x[:, -4:]  # fewer positions than taps: the same sums
    assert torch.allclose(causal_conv(short, taps), _reference_conv(short, taps), atol=1e-5)


def test_the_learnable_filter_is_fmlps_at_the_last_position_of_a_full_window() -> None:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(B, L, C, generator=gen)
    response = torch.complex(*torch.randn(2, L // 2 + 1, C, generator=gen))
    published = torch.fft.irfft(
        torch.fft.rfft(x, dim=1, norm="ortho") * response, n=L, dim=1, norm="ortho"
    )  # FMLP-Rec: circular, every position sees the whole window
    ours = causal_conv(x, circular_taps(response, L))
    assert torch.allclose(ours[:, -1], published[:, -1], atol=1e-5)
    assert not torch.allclose(ours[:, 0], published[:, 0], atol=1e-3)  # no look-ahead


def test_the_low_pass_is_bsarecs_at_the_last_position_of_a_full_window() -> None:
    x = torch.randn(B, L, C, generator=torch.Generator().manual_seed(2))
    cutoff = 5
    spectrum = torch.fft.rfft(x, dim=1, norm="ortho")
    spectrum[:, cutoff // 2 + 1 :] = 0
    published = torch.fft.irfft(spectrum, n=L, dim=1, norm="ortho")
    ours = causal_conv(x, low_pass_taps(L, cutoff))
    assert torch.allclose(ours[:, -1], published[:, -1], atol=1e-5)


def _bsarec_low_pass(x: torch.Tensor, cutoff: int) -> torch.Tensor:
    """BSARec's code: the window's rfft, the bins from c // 2 + 1 on zeroed, back."""
    spectrum = torch.fft.rfft(x, dim=1, norm="ortho")
    spectrum[:, cutoff // 2 + 1 :] = 0
    return torch.fft.irfft(spectrum, n=x.shape[1], dim=1, norm="ortho")


def test_the_whole_window_operator_is_bsarecs_low_pass_at_every_position() -> None:
    x = torch.randn(B, L, C, generator=torch.Generator().manual_seed(4))
    x[0, :5] = 0  # a left-padded row
    operator = low_pass_operator(L, 5, whole_window=True)
    assert torch.allclose(apply_operator(x, operator), _bsarec_low_pass(x, 5), atol=1e-5)
    trimmed = x[:, -7:]  # the padding trimmed off: the same outputs at the kept positions
    padded = torch.cat([torch.zeros(B, L - 7, C), trimmed], dim=1)
    expected = _bsarec_low_pass(padded, 5)[:, -7:]
    assert torch.allclose(apply_operator(trimmed, operator), expected, atol=1e-5)


def test_the_causal_operator_is_the_causal_low_pass() -> None:
    x = torch.randn(B, L, C, generator=torch.Generator().manual_seed(5))
    operator, taps = low_pass_operator(L, 3, whole_window=False), low_pass_taps(L, 3)
    for part in (x, x[:, -4:]):  # a full window and a short one
        assert torch.allclose(apply_operator(part, operator), causal_conv(part, taps), atol=1e-5)


def test_the_recurrent_unit_is_its_recurrence_step_by_step() -> None:
    torch.manual_seed(3)
    unit = Recurrence(dim=C, window=L, dropout=0.0, radii=(0.8, 0.99)).eval()
    x = torch.randn(B, L, C)
    pad = torch.zeros(B, L, dtype=torch.bool)
    nu, theta, gamma = torch.exp(unit.params_log)
    lam = torch.exp(torch.complex(-nu, theta))
    drive = unit.into(x)
    drive = torch.complex(drive[..., : unit.state], drive[..., unit.state :]) * gamma
    state = torch.zeros(B, unit.state, dtype=torch.complex64)
    steps = []
    for t in range(L):
        state = lam * state + drive[:, t]
        steps.append(torch.cat([state.real, state.imag], dim=-1))
    expected = unit.norm(x + unit.out(torch.stack(steps, dim=1)))
    with torch.no_grad():
        assert torch.allclose(unit(x, pad), expected, atol=1e-4)
    assert (nu > 0).all() and ((lam.abs() >= 0.8 - 1e-6) & (lam.abs() <= 0.99 + 1e-6)).all()
