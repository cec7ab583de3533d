"""A model trained with sg.nn and sg.optim follows PyTorch's loss curve from the same weights.

The reference losses come from PyTorch (`python -m benchmarks.torch_reference` writes
tests/data/torch_losses.json); PyTorch itself is not needed to run this test.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest

import srcgrad as sg

REF = json.loads((Path(__file__).resolve().parents[1] / "data" / "torch_losses.json").read_text())


def _model() -> sg.nn.Sequential:
    return sg.nn.Sequential(
        sg.nn.Conv1d(2, 4, 3, padding=1),
        lambda h: h.reshape((h.shape[0], -1)),
        sg.nn.Linear(20, 8, act="tanh"),
        sg.nn.LayerNorm(8),
        sg.nn.Linear(8, 1),
    )


def _train(run: dict) -> list[float]:
    model = _model()
    # Sequential numbers the reshape too: the torch layers 0-3 are ours 0, 2, 3, 4
    names = {"0": "0", "1": "2", "2": "3", "3": "4"}
    model.load_state_dict(
        {f"{names[k[0]]}{k[1:]}": np.asarray(v, np.float32) for k, v in REF["weights"].items()}
    )
    x = sg.tensor(np.asarray(REF["x"], np.float32))
    y = sg.tensor(np.asarray(REF["y"], np.float32))
    params = model.parameters()
    opt = None
    if run["optimizer"] == "AdamW":
        opt = sg.optim.AdamW(params, lr=run["lr"], weight_decay=run["weight_decay"])
    elif run["optimizer"] == "SGD":
        opt = sg.optim.SGD(
            params,
            lr=run["lr"],
            momentum=run["momentum"],
            nesterov=run["nesterov"],
            weight_decay=run["weight_decay"],
        )
    losses = []
    for _ in range(REF["steps"]):
        with sg.autograd.record():
            loss = sg.mean((model(x) - y) ** 2)
        losses.append(loss.item())
        if opt is not None:
            opt.zero_grad()
            loss.backward()
            opt.step()
        else:
            model.zero_grad()
            loss.backward()
            with sg.autograd.no_grad():
                for p in model.parameters():
                    p -= run["lr"] * p.grad
    assert model.parameters() == params  # updated in place: the same Tensors
    return losses


@pytest.mark.parametrize("name", sorted(REF["runs"]))
def test_loss_curve_matches_pytorch(name):
    run = REF["runs"][name]
    # PyTorch's curves were recorded on CPU in float32; a GPU's matmuls default to TF32.
    with jax.default_matmul_precision("highest"):
        losses = _train(run)
    np.testing.assert_allclose(losses, run["losses"], rtol=1e-4)
