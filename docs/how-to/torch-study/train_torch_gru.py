"""A GRU of 32 units trained on the 3-bit flip-flop in plain PyTorch, saved as a state dict.

    python train_torch_gru.py        # writes torch-gru.pt; then: dynlab import ... (study.toml's header)

The batches are dynlab's own ``flipflop`` task's (so the imported run and the study's cells see
one task), drawn in NumPy and handed to PyTorch; nothing else of dynlab is used here.
"""

import jax
import numpy as np
import torch

from dynlab import registry

HIDDEN, STEPS = 32, 1500
task = registry.build("task", "flipflop")
torch.set_num_threads(1)  # small ops on shared cores: the thread pool's contention costs more than it gives
torch.manual_seed(0)
gru, readout = torch.nn.GRU(3, HIDDEN, batch_first=True), torch.nn.Linear(HIDDEN, 3)
params = [*gru.parameters(), *readout.parameters()]
opt = torch.optim.Adam(params, lr=3e-3)
for i in range(STEPS):
    x, y = (torch.from_numpy(np.array(a)) for a in task.batch(jax.random.key(10_000 + i), 64)[:2])
    loss = torch.mean((readout(gru(x)[0]) - y) ** 2)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
x, y = (torch.from_numpy(np.array(a)) for a in task.batch(jax.random.key(1), 256, split="test")[:2])
with torch.no_grad():
    accuracy = float((torch.sign(readout(gru(x)[0])) == torch.sign(y)).float().mean())
print(f"held-out sign accuracy {accuracy:.4f}")
torch.save({**{f"rnn.{k}": v for k, v in gru.state_dict().items()},
            **{f"fc.{k}": v for k, v in readout.state_dict().items()}}, "torch-gru.pt")
