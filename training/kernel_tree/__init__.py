"""The divide-and-conquer kernel sampling tree (Blanc & Rendle 2018, section 3.2).

`node_sums` keeps the feature sums of every node in step with the item table; `draws` samples
from them and gives the exact probability of what it samples.
"""

from training.kernel_tree.draws import KernelTree

__all__ = ["KernelTree"]
