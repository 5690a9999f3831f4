"""Filters along the sequence: causal ones from the frequency domain, and BSARec's low-pass.

FMLP-Rec and BSARec filter a window of L items with an FFT over the window: a circular
convolution, in which every position sees every other. A next-item model trained at every
position must not see later items, so the towers here apply each filter as the linear, causal
convolution that the circular one is at the window's last position: position t gets what the
published filter gives the last position of the window of L items ending at t (items before
the log's start are zeros). At the last position of a full window the two agree exactly.
The convolution runs as an FFT of length >= T + K - 1 (no wrap-around), in float32.

BSARec's fixed low-pass is a linear map of the window: `low_pass_operator` builds it as an
`[L, L]` matrix, causal as above or over the whole window as BSARec's code filters it (a
circular convolution, every position seeing the window's later items; only a model trained and
served at the window's last position may use it).
"""

from __future__ import annotations

import torch
from torch import Tensor


def causal_conv(x: Tensor, kernel: Tensor) -> Tensor:
    """`y[:, t] = sum_j kernel[j] * x[:, t - j]` over j = 0..K-1, zeros before the start.

    Args:
        x: `[B, T, C]` real or complex sequence.
        kernel: `[K, C]` or `[K, 1]` filter taps, lag 0 first; real or complex.

    Returns:
        `[B, T, C]` in `x`'s dtype (complex if either input is).

    """
    length = x.shape[1]
    size = length + kernel.shape[0] - 1
    with torch.autocast(x.device.type, enabled=False):
        if x.is_complex() or kernel.is_complex():
            spectrum = torch.fft.fft(x.to(torch.complex64), n=size, dim=1)
            taps = torch.fft.fft(kernel.to(torch.complex64), n=size, dim=0)
            return torch.fft.ifft(spectrum * taps, n=size, dim=1)[:, :length]
        spectrum = torch.fft.rfft(x.float(), n=size, dim=1)
        taps = torch.fft.rfft(kernel.float(), n=size, dim=0)
        y = torch.fft.irfft(spectrum * taps, n=size, dim=1)[:, :length]
    return y.to(x.dtype)


def circular_taps(response: Tensor, window: int) -> Tensor:
    """The taps `[window, C]` of the circular convolution with frequency response `response`.

    `response [window // 2 + 1, C]` (complex) multiplies the rfft of a window; the same filter
    in time is `irfft(response)`, lag 0 first.
    """
    return torch.fft.irfft(response, n=window, dim=0)


def low_pass_taps(window: int, cutoff: int) -> Tensor:
    """`[window, 1]` taps of BSARec's low-pass: the lowest `cutoff // 2 + 1` rfft bins kept."""
    keep = min(cutoff // 2 + 1, window // 2 + 1)
    response = torch.zeros(window // 2 + 1, 1, dtype=torch.complex64)
    response[:keep] = 1.0
    return circular_taps(response, window)


def low_pass_operator(window: int, cutoff: int, whole_window: bool) -> Tensor:
    """`[window, window]`: row t is BSARec's low-pass output at position t, column s its input.

    `whole_window`: the circular convolution over the window (BSARec's code); otherwise its
    causal form (`causal_conv` with `low_pass_taps`). The trailing `[T, T]` block applies the
    same filter to a window of T <= L positions whose first L - T are zero padding.
    """
    taps = low_pass_taps(window, cutoff)[:, 0]
    lag = torch.arange(window).unsqueeze(1) - torch.arange(window).unsqueeze(0)  # t - s
    if whole_window:
        return taps[lag % window]
    return torch.where(lag >= 0, taps[lag.clamp(min=0)], torch.zeros(()))


def apply_operator(x: Tensor, operator: Tensor) -> Tensor:
    """`x [B, T, C]` (left-padded with zeros to the window) through `operator [R, L]`, float32.

    `operator`'s rows are the window's last R positions (`low_pass_operator(...)[-R:]`);
    returns `[B, min(R, T), C]`, the outputs at the last of them.
    """
    length = x.shape[1]
    with torch.autocast(x.device.type, enabled=False):
        y = torch.matmul(operator[-length:, -length:], x.float())
    return y.to(x.dtype)
