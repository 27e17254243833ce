"""MAP-Net tests run tiny models: one intra-op thread is faster than several.

With tensors this small, every op is dominated by thread hand-off; on a
loaded machine a 2-thread pool made a 1-layer forward pass ~500x slower.
The previous setting is restored after each test.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
