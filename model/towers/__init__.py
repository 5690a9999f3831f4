"""The towers as plain `nn.Module`s: the query towers (one module each) and the item tower.

Importing this package registers the built-in query towers (`model.tower_settings.TOWERS`):
`sasrec` (self-attention), `mean` (running mean), `fmlp` (learnable frequency filters),
`bsarec` (attention mixed with a frequency rescaling) and `lru` (linear recurrent units).
A new tower is one module here with its settings class and `@register_tower`, imported below.
Training and serving build towers through `model.build`.
"""

from model.towers.base import FastDropout, QueryTowerBase, TowerShape
from model.towers.bsarec import BsarecTower
from model.towers.fmlp import FmlpTower
from model.towers.item import ItemTower, TwoTowerModel
from model.towers.lru import LruTower
from model.towers.mean import MeanPoolTower
from model.towers.sasrec import SasrecTower

__all__ = [
    "BsarecTower",
    "FastDropout",
    "FmlpTower",
    "ItemTower",
    "LruTower",
    "MeanPoolTower",
    "QueryTowerBase",
    "SasrecTower",
    "TowerShape",
    "TwoTowerModel",
]
