"""The device of the tests that can run on an accelerator: `RECSYS_TEST_DEVICE` (default cpu).

`RECSYS_TEST_DEVICE=cuda` runs them with their tensors on the GPU (scripts/gpu-check.sh); the
device is read back from a tensor, so "cuda" compares equal to the tensors' "cuda:0".
"""

import os

import torch

TEST_DEVICE = torch.empty(0, device=os.environ.get("RECSYS_TEST_DEVICE", "cpu")).device
