"""Reference loss curves from PyTorch for tests/imperative/test_torch_parity.py.

    python -m benchmarks.torch_reference      # needs torch; writes tests/data/torch_losses.json

Trains a small model (Conv1d -> Linear(tanh) -> LayerNorm -> Linear, mean squared error)
in PyTorch from fixed initial weights and data, with three optimizers: AdamW, SGD with
Nesterov momentum and weight decay, and the hand-written `p -= lr * p.grad` loop under
`torch.no_grad()`. The JSON holds the initial weights (a state_dict, PyTorch's layout:
a Linear's weight is (out, in), as sg.nn.Linear's), the data, the settings and the losses;
the test trains the same model with sg.nn / sg.optim and compares the curves. PyTorch is
not a test dependency: only this script imports it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "torch_losses.json"
STEPS = 8
BATCH, CHANNELS, LENGTH, HIDDEN = 6, 2, 5, 8
RUNS = {
    "adamw": {"optimizer": "AdamW", "lr": 0.01, "weight_decay": 0.05},
    "sgd_nesterov": {
        "optimizer": "SGD",
        "lr": 0.05,
        "momentum": 0.9,
        "nesterov": True,
        "weight_decay": 0.001,
    },
    "manual_sgd": {"optimizer": "manual", "lr": 0.1},
}


def initial() -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Initial weights (a PyTorch state_dict; a Linear's weight drawn as (in, out), stored as
    (out, in)), inputs and targets, float32."""
    rng = np.random.default_rng(2026)

    def r(*shape: int, scale: float = 0.4) -> np.ndarray:
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    weights = {
        "0.weight": r(4, CHANNELS, 3),
        "0.bias": r(4),
        "1.weight": r(4 * LENGTH, HIDDEN).T.copy(),
        "1.bias": r(HIDDEN),
        "2.weight": 1 + r(HIDDEN, scale=0.1),
        "2.bias": r(HIDDEN, scale=0.1),
        "3.weight": r(HIDDEN, 1).T.copy(),
        "3.bias": r(1),
    }
    return weights, r(BATCH, CHANNELS, LENGTH, scale=1.0), r(BATCH, 1, scale=1.0)


def torch_losses(
    run: dict, weights: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray
) -> list[float]:
    import torch
    from torch import nn

    conv, lin1 = nn.Conv1d(CHANNELS, 4, 3, padding=1), nn.Linear(4 * LENGTH, HIDDEN)
    norm, lin2 = nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, 1)
    with torch.no_grad():
        for name, module in zip("0123", (conv, lin1, norm, lin2)):
            w = weights[f"{name}.weight"]
            module.weight.copy_(torch.from_numpy(w))
            module.bias.copy_(torch.from_numpy(weights[f"{name}.bias"]))

    def model(x: torch.Tensor) -> torch.Tensor:
        h = conv(x).reshape(x.shape[0], -1)
        return lin2(norm(torch.tanh(lin1(h))))

    params = [p for m in (conv, lin1, norm, lin2) for p in m.parameters()]
    kind = run["optimizer"]
    opt = None
    if kind == "AdamW":
        opt = torch.optim.AdamW(params, lr=run["lr"], weight_decay=run["weight_decay"])
    elif kind == "SGD":
        opt = torch.optim.SGD(
            params,
            lr=run["lr"],
            momentum=run["momentum"],
            nesterov=run["nesterov"],
            weight_decay=run["weight_decay"],
        )
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    losses = []
    for _ in range(STEPS):
        loss = torch.mean((model(xt) - yt) ** 2)
        losses.append(float(loss.detach()))
        if opt is not None:
            opt.zero_grad()
            loss.backward()
            opt.step()
        else:
            for p in params:
                p.grad = None
            loss.backward()
            with torch.no_grad():
                for p in params:
                    p -= run["lr"] * p.grad
    return losses


def main() -> None:
    import torch

    weights, x, y = initial()
    out = {
        "torch_version": torch.__version__,
        "steps": STEPS,
        "weights": {k: v.tolist() for k, v in weights.items()},
        "x": x.tolist(),
        "y": y.tolist(),
        "runs": {
            name: {**run, "losses": torch_losses(run, weights, x, y)} for name, run in RUNS.items()
        },
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
