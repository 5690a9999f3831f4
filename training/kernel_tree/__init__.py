"""The divide-and-conquer kernel sampling tree (Blanc & Rendle 2018, section 3.2).

`node_sums` keeps the feature sums of every node in step with the item table; `draws` samples
from them and gives the exact probability of what it samples: `descent` takes a step's draws
to their buckets (the upper levels scored whole for all queries at once), `buckets` picks an
item inside each drawn bucket (grouped by bucket over the step).
"""

from training.kernel_tree.draws import KernelTree

__all__ = ["KernelTree"]
