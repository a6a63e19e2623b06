"""The packer: documents in, bins of tokens out (docs/packer.md, docs/pipeline.md).

- `PackerConfig` (config.py): the one frozen configuration and the weight rule.
- `Packer`, `Bin` (facade.py): the Python facade around the C++ packer (ext/core).
- `PackerStats` (stats.py): its counters, typed.
- `Room` (room.py): the model's room, and the one rule of when a bin is cut for it.
"""

from worker.packer.config import Order, PackerConfig
from worker.packer.facade import Bin, Packer
from worker.packer.room import Room
from worker.packer.stats import PackerStats

__all__ = ["Bin", "Order", "Packer", "PackerConfig", "PackerStats", "Room"]
