"""One torch thread: the machine is shared and the small nets are fastest that way."""

import torch

torch.set_num_threads(1)
