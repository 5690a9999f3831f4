"""The service's CPU thread cap, applied on each thread that runs the model or the index.

torch and faiss share one OpenMP runtime here (a thread's `omp_set_num_threads` is seen by
both), and OpenMP thread counts belong to the calling thread: a cap set on the event loop
does not reach the model thread or the loader. So the cap is one number, set by every
thread that does the work (the batcher's model thread, a reload's loading thread).
"""

from __future__ import annotations

import faiss
import torch


def limit_threads(threads: int) -> None:
    """Cap torch's intra-op pool and this thread's OpenMP teams (torch and faiss) at `threads`."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    torch.set_num_threads(threads)
    faiss.omp_set_num_threads(threads)
