"""The MNIST-5k classifier: an MLP 64-128-10 (ReLU) on a flat parameter vector, so that the federated methods
(which add, average and integrate parameter vectors) work on 1-D tensors directly.

Layout of θ (P = 64·128 + 128 + 128·10 + 10 = 9610 for the default sizes): W1 (in, hidden) row-major, b1 (hidden),
W2 (hidden, out), b2 (out). The cross-entropy gradient is written out by hand (two matmuls each way), which is
several times faster than autograd for 20-sample minibatches; a test checks it against autograd.
"""
from __future__ import annotations

import math

import torch


def n_params(sizes: tuple[int, int, int]) -> int:
    """Number of parameters of the MLP in → hidden → out."""
    i, h, o = sizes
    return i * h + h + h * o + o


def _unflatten(theta: torch.Tensor, sizes: tuple[int, int, int]):
    i, h, o = sizes
    if theta.shape != (n_params(sizes),):
        raise ValueError(f"mlp: θ must have shape ({n_params(sizes)},) for sizes {sizes}, got {tuple(theta.shape)}")
    a = i * h
    W1, b1 = theta[:a].view(i, h), theta[a:a + h]
    W2, b2 = theta[a + h:a + h + h * o].view(h, o), theta[a + h + h * o:]
    return W1, b1, W2, b2


def init_mlp(sizes: tuple[int, int, int] = (64, 128, 10), seed: int = 0) -> torch.Tensor:
    """θ₀ as torch.nn.Linear initialises (weights and biases ~ U(±1/√fan_in)), from torch.Generator(seed); float32."""
    gen = torch.Generator().manual_seed(int(seed))
    i, h, o = sizes
    parts = []
    for fan_in, shape in ((i, (i, h)), (i, (h,)), (h, (h, o)), (h, (o,))):
        bound = 1.0 / math.sqrt(fan_in)
        parts.append((torch.rand(shape, generator=gen) * 2 - 1).mul_(bound).reshape(-1))
    return torch.cat(parts)


def mlp_logits(theta: torch.Tensor, X: torch.Tensor, sizes: tuple[int, int, int] = (64, 128, 10)) -> torch.Tensor:
    """Logits (n, out) of X (n, in)."""
    W1, b1, W2, b2 = _unflatten(theta, sizes)
    return torch.relu(X @ W1 + b1) @ W2 + b2


def mlp_loss_grad(theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor,
                  sizes: tuple[int, int, int] = (64, 128, 10)) -> tuple[float, torch.Tensor]:
    """Mean cross-entropy over the batch and its gradient w.r.t. θ (P,)."""
    W1, b1, W2, b2 = _unflatten(theta, sizes)
    z1 = X @ W1 + b1
    hid = torch.relu(z1)
    logits = hid @ W2 + b2
    logp = torch.log_softmax(logits, dim=1)
    n = X.shape[0]
    loss = -logp[torch.arange(n), y].mean()
    dlogits = logp.exp()
    dlogits[torch.arange(n), y] -= 1.0
    dlogits /= n
    gW2 = hid.T @ dlogits
    gb2 = dlogits.sum(0)
    dz1 = (dlogits @ W2.T) * (z1 > 0)
    gW1 = X.T @ dz1
    gb1 = dz1.sum(0)
    return float(loss), torch.cat([gW1.reshape(-1), gb1, gW2.reshape(-1), gb2])


def mlp_metrics(theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor,
                sizes: tuple[int, int, int] = (64, 128, 10)) -> tuple[float, float]:
    """(mean cross-entropy, accuracy in [0, 1]) of θ on (X, y)."""
    with torch.no_grad():
        logits = mlp_logits(theta, X, sizes)
        loss = torch.nn.functional.cross_entropy(logits, y)
        acc = (logits.argmax(1) == y).float().mean()
    return float(loss), float(acc)


class MlpLearner:
    """The MNIST-5k learner of :func:`~.experiment.run_image`: the MLP on PCA features.

    X_train (n, in) float32, y_train (n,) int64, X_test, y_test as arrays; hidden width → sizes (in, hidden, 10).
    Per round the loss is taken over the whole training set and the accuracy over the test set."""

    def __init__(self, X_train, y_train, X_test, y_test, hidden: int = 128) -> None:
        self.Xtr, self.ytr = torch.as_tensor(X_train), torch.as_tensor(y_train)
        self.Xte, self.yte = torch.as_tensor(X_test), torch.as_tensor(y_test)
        self.sizes = (int(self.Xtr.shape[1]), int(hidden), 10)

    def init(self, seed: int) -> torch.Tensor:
        """θ₀ (P,) float32 from torch.Generator(seed)."""
        return init_mlp(self.sizes, seed)

    def grad(self, theta: torch.Tensor, idx: torch.Tensor, k: int = 0) -> torch.Tensor:
        """Minibatch gradient (P,) of the mean cross-entropy on the training rows ``idx``."""
        return mlp_loss_grad(theta, self.Xtr[idx], self.ytr[idx], self.sizes)[1]

    def round_metrics(self, theta: torch.Tensor) -> tuple[float, float]:
        """(training loss, test accuracy in [0, 1])."""
        return mlp_metrics(theta, self.Xtr, self.ytr, self.sizes)[0], mlp_metrics(theta, self.Xte, self.yte,
                                                                                    self.sizes)[1]

    def final_metrics(self, theta: torch.Tensor) -> tuple[float, float]:
        """(test loss, test accuracy in [0, 1])."""
        return mlp_metrics(theta, self.Xte, self.yte, self.sizes)
