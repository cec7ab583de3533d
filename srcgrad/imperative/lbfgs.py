"""PyTorch's `torch.optim.LBFGS` (`sg.optim.LBFGS`): L-BFGS with its closure interface,
defaults, stopping rules and strong-Wolfe line search.

    opt = sg.optim.LBFGS(model.parameters(), lr=1, line_search_fn="strong_wolfe")
    def closure():
        opt.zero_grad()
        with sg.autograd.record():
            loss = loss_fn(model(x), y)
        loss.backward()
        return loss
    opt.step(closure)          # up to max_iter iterations; returns the first loss

The algorithm is PyTorch's step for step (the two-loop recursion over the last
`history_size` pairs, a first step of min(1, 1 / |g|_1) lr, the same five stopping tests,
the same cubic-interpolation line search), run on the host in NumPy over the flattened
parameters, in their dtype: each iteration costs the closure's forward and backward, and a
few vector products. One parameter group, as PyTorch's. The state carried from one `step`
to the next (direction, step size, history, and the counters `func_evals` and `n_iter`) is
in `opt.lbfgs` (PyTorch keeps it in `opt.state[first parameter]`).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np

from ..base.errors import SrcgradError, user_location
from .optim import HyperparameterError, Optimizer, checked_hyper

Vector = np.ndarray


class LBFGS(Optimizer):
    """L-BFGS (see the module's docstring); `max_eval` defaults to max_iter * 5 // 4."""

    NUMERIC = ("lr",)

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1.0,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ):
        if line_search_fn not in (None, "strong_wolfe"):
            raise HyperparameterError(
                f"sg.optim.LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                f"{line_search_fn!r}",
                loc=user_location(),
            )
        defaults = dict(
            lr=lr,
            max_iter=int(max_iter),
            max_eval=int(max_iter * 5 // 4 if max_eval is None else max_eval),
            tolerance_grad=tolerance_grad,
            tolerance_change=tolerance_change,
            history_size=int(history_size),
            line_search_fn=line_search_fn,
        )
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise HyperparameterError(
                "sg.optim.LBFGS doesn't support per-parameter options (parameter groups)",
                loc=user_location(),
            )
        self.lbfgs: dict[str, Any] = {"func_evals": 0, "n_iter": 0}

    def check(self, group: dict[str, Any]) -> None:
        checked_hyper("LBFGS", learning_rate=(group["lr"], 0.0, np.inf))

    # ---------------------------------------------------------------- flat parameters
    def _flat_grad(self) -> Vector:
        parts = []
        for p in self.params:
            g = p.grad
            parts.append(np.zeros(p.size, p.dtype) if g is None else np.asarray(g.value()).ravel())
        return np.concatenate(parts)

    def _values(self) -> list[Vector]:
        return [np.asarray(p.value()) for p in self.params]

    def _set(self, values: list[Vector]) -> None:
        for p, v in zip(self.params, values):
            p.assign(v)

    def _add(self, t: float, d: Vector) -> None:
        """params += t d."""
        at = 0
        for p in self.params:
            v = np.asarray(p.value())
            step = (d[at : at + v.size] * v.dtype.type(t)).reshape(v.shape)
            p.assign(v + step)
            at += v.size

    def _evaluate(self, closure: Callable[[], Any]) -> float:
        loss = closure()
        return float(loss.item() if hasattr(loss, "item") else loss)

    # ---------------------------------------------------------------- the step
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """Run up to max_iter iterations; `closure` recomputes the loss and the gradients
        (zero_grad, forward under record(), backward) and returns the loss. Returns the
        closure's first loss."""
        if closure is None:
            raise SrcgradError(
                "sg.optim.LBFGS.step needs a closure that recomputes the loss and its "
                "gradients and returns the loss (PyTorch's interface)",
                loc=user_location(),
            )
        g = self.param_groups[0]
        lr, max_iter, max_eval = float(g["lr"]), g["max_iter"], g["max_eval"]
        tol_grad, tol_change = g["tolerance_grad"], g["tolerance_change"]
        history = g["history_size"]
        st = self.lbfgs

        orig_loss = closure()
        loss = float(orig_loss.item() if hasattr(orig_loss, "item") else orig_loss)
        evals = 1
        st["func_evals"] += 1
        flat_grad = self._flat_grad()
        if np.abs(flat_grad).max() <= tol_grad:
            return orig_loss

        d, t = st.get("d"), st.get("t")
        old_dirs, old_stps, ro = st.get("old_dirs"), st.get("old_stps"), st.get("ro")
        h_diag = st.get("H_diag")
        prev_flat_grad, prev_loss = st.get("prev_flat_grad"), st.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            st["n_iter"] += 1
            if st["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * d.dtype.type(t)
                ys = float(y @ s)
                if ys > 1e-10:
                    if len(old_dirs) == history:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / float(y @ y)
                d = _two_loop(flat_grad, old_dirs, old_stps, ro, h_diag)
            prev_flat_grad, prev_loss = flat_grad.copy(), loss
            if st["n_iter"] == 1:
                t = min(1.0, 1.0 / float(np.abs(flat_grad).sum())) * lr
            else:
                t = lr
            gtd = float(flat_grad @ d)
            if gtd > -tol_change:
                break
            if g["line_search_fn"] == "strong_wolfe":
                x0 = self._values()

                def directional(
                    x: list[Vector], step: float, direction: Vector
                ) -> tuple[float, Vector]:
                    self._add(step, direction)
                    f = self._evaluate(closure)
                    grad = self._flat_grad()
                    self._set(x)
                    return f, grad

                loss, flat_grad, t, ls_evals = _strong_wolfe(
                    directional, x0, t, d, loss, flat_grad, gtd
                )
                self._add(t, d)
                opt_cond = np.abs(flat_grad).max() <= tol_grad
            else:
                self._add(t, d)
                ls_evals = 0
                opt_cond = False
                if n_iter != max_iter:
                    loss = self._evaluate(closure)
                    flat_grad = self._flat_grad()
                    opt_cond = np.abs(flat_grad).max() <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            st["func_evals"] += ls_evals
            if n_iter == max_iter or evals >= max_eval or opt_cond:
                break
            if np.abs(d * d.dtype.type(t)).max() <= tol_change:
                break
            if abs(loss - prev_loss) < tol_change:
                break

        st.update(
            d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
            prev_flat_grad=prev_flat_grad, prev_loss=prev_loss,
        )  # fmt: skip
        return orig_loss

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "lbfgs": dict(self.lbfgs)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self.lbfgs = dict(state_dict.get("lbfgs", {"func_evals": 0, "n_iter": 0}))


def _two_loop(
    flat_grad: Vector, dirs: list[Vector], stps: list[Vector], ro: list[float], h_diag: float
) -> Vector:
    """-H g by the two-loop recursion over the stored (y, s) pairs."""
    dt = flat_grad.dtype.type
    q = -flat_grad
    al = [0.0] * len(dirs)
    for i in range(len(dirs) - 1, -1, -1):
        al[i] = float(stps[i] @ q) * ro[i]
        q = q - dt(al[i]) * dirs[i]
    r = q * dt(h_diag)
    for i in range(len(dirs)):
        be_i = float(dirs[i] @ r) * ro[i]
        r = r + dt(al[i] - be_i) * stps[i]
    return r


def _cubic_interpolate(
    x1: float,
    f1: float,
    g1: float,
    x2: float,
    f2: float,
    g2: float,
    bounds: tuple[float, float] | None = None,
) -> float:
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clipped to
    `bounds` (default: between x1 and x2); their midpoint when the cubic has none."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square < 0:
        return (lo + hi) / 2.0
    d2 = d2_square**0.5
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, lo), hi)


Objective = Callable[[list[Vector], float, Vector], tuple[float, Vector]]


def _strong_wolfe(
    obj: Objective,
    x: list[Vector],
    t: float,
    d: Vector,
    f: float,
    g: Vector,
    gtd: float,
    c1: float = 1e-4,
    c2: float = 0.9,
    tolerance_change: float = 1e-9,
    max_ls: int = 25,
) -> tuple[float, Vector, float, int]:
    """A step t along d meeting the strong Wolfe conditions: bracketing, then zoom by cubic
    interpolation (PyTorch's). Returns (loss, gradient, t, evaluations)."""
    d_norm = float(np.abs(d).max())
    f_new, g_new = obj(x, t, d)
    evals = 1
    gtd_new = float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    bracket: list[float] = []
    bracket_f: list[float] = []
    bracket_g: list[Vector] = []
    bracket_gtd: list[float] = []
    while ls_iter < max_ls:
        wolfe = abs(gtd_new) <= -c2 * gtd
        if (
            f_new > f + c1 * t * gtd
            or (ls_iter > 1 and f_new >= f_prev)
            or (gtd_new >= 0 and not wolfe)
        ):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if wolfe:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, (min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new, gtd_new
        f_new, g_new = obj(x, t, d)
        evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]

    insuf_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(
            bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1]
        )
        top, bottom = max(bracket), min(bracket)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:
            if insuf_progress or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj(x, t, d)
        evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high] = t, f_new
            bracket_g[high], bracket_gtd[high] = g_new, gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low] = t, f_new
            bracket_g[low], bracket_gtd[low] = g_new, gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


__all__ = ["LBFGS"]
