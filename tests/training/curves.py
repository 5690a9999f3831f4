"""Validation curves that tell early-stopping rules apart (tests of training/stopping.py and
benchmarks/sweeps/reuse.py)."""

# a slow climb under round-to-round noise, as a sampled run's plateau: the rounds after the
# 3rd never beat 0.0600 (the 9th falls short by 0.00004), yet the trend is still up; patience
# 10 on each round alone stops it at round 13, on the mean of the last 3 it goes on
NOISY_CLIMB = [0.050, 0.058, 0.0600, 0.0590, 0.0596, 0.0588, 0.0598, 0.0592, 0.05996, 0.0597,
               0.0599, 0.0598, 0.0599, 0.0604, 0.0606, 0.0608]  # fmt: skip

# single rounds beat the best now and then while the rest sink: patience 10 on each round
# alone never stops it, on the mean of 3 it stops at round 15
SPIKES = [0.1, 0.2, 0.3, 0.4, 0.5, *([0.3] * 7 + [0.51]), *([0.3] * 7 + [0.52]), 0.3, 0.3]
