"""The MNIST-5k classifier: an MLP 64-128-10 (ReLU) on a flat parameter vector, so that the federated methods
(which add, average and integrate parameter vectors) work on 1-D tensors directly.

Layout of θ (P = 64·128 + 128 + 128·10 + 10 = 9610 for the default sizes): W1 (in, hidden) row-major, b1 (hidden),
W2 (hidden, out), b2 (out). The cross-entropy gradient is written out by hand (two matmuls each way), which is
several times faster than autograd for 20-sample minibatches; a test checks it against autograd.

Client objectives of two baselines of the paper (§6), both on top of the cross-entropy:

* FedDecorr (Shi et al., ICLR 2023, "Towards understanding and mitigating dimensional collapse in heterogeneous
  federated learning", eq. 4): + β·(1/d²)‖K‖_F², K = ẑᵀẑ/N the correlation matrix of the batch's representations
  z (N, d) (here the hidden layer after the ReLU), ẑ = (z − mean) / sqrt(var + 1e-5) per column (variance with 1/N).
* FedRS (Li & Zhan, KDD 2021, "FedRS: Federated learning with restricted softmax for label distribution non-IID
  data", §4): the logits of the classes a client has no sample of are multiplied by α ∈ [0, 1] before the softmax
  ("restricted softmax"); [R] here the whole logit (weights and bias) is scaled.
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


DECORR_EPS = 1e-5  # variance floor of the FedDecorr standardisation (FedDecorr paper's implementation value)


def decorr_loss(z: torch.Tensor) -> torch.Tensor:
    """FedDecorr's regulariser (1/d²)‖K‖_F² of representations z (N, d), K = ẑᵀẑ/N, ẑ the column-standardised z
    (mean and 1/N variance over the batch, variance floor 1e-5). Scalar tensor (differentiable). N = 1: 0."""
    n, d = z.shape
    if n < 2:
        return z.sum() * 0.0
    zc = z - z.mean(0, keepdim=True)
    zh = zc / torch.sqrt(zc.pow(2).mean(0, keepdim=True) + DECORR_EPS)
    K = zh.T @ zh / n
    return K.pow(2).sum() / d ** 2


def decorr_loss_grad(z: torch.Tensor, *, with_loss: bool = True) -> tuple[torch.Tensor | None, torch.Tensor]:
    """:func:`decorr_loss` of z (N, d) and its gradient (N, d), written out (several times cheaper than autograd on
    20-row batches; a test checks it against autograd). With ẑ = z_c/s (z_c = z − mean, s² = mean(z_c²) + 1e-5 per
    column), K = ẑᵀẑ/N and G = ∂L/∂ẑ = 4ẑK/(N d²): ∂L/∂z = (G − mean(G))/s − z_c·mean(G ⊙ z_c)/s³.
    ``with_loss=False`` skips the loss (returned as None): the gradient is the same."""
    n, d = z.shape
    if n < 2:
        return (z.sum() * 0.0 if with_loss else None), torch.zeros_like(z)
    zc = z - z.mean(0, keepdim=True)
    s = torch.sqrt(zc.pow(2).mean(0, keepdim=True) + DECORR_EPS)
    zh = zc / s
    K = zh.T @ zh / n
    G = zh @ K * (4.0 / (n * d ** 2))
    grad = (G - G.mean(0, keepdim=True)) / s - zc * (G * zc).mean(0, keepdim=True) / s ** 3
    return (K.pow(2).sum() / d ** 2 if with_loss else None), grad


_ARANGE: dict[int, torch.Tensor] = {}  # torch.arange(n) per batch size n (read-only index tensors, built once)


def _arange(n: int) -> torch.Tensor:
    rows = _ARANGE.get(n)
    if rows is None:
        rows = _ARANGE[n] = torch.arange(n)
    return rows


def _loss_grad(theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor, sizes: tuple[int, int, int], decorr: float,
               logit_scale: torch.Tensor | None, with_loss: bool) -> tuple[float | None, torch.Tensor]:
    """:func:`mlp_loss_grad`; ``with_loss=False`` skips the loss (None), the gradient is the same tensor."""
    W1, b1, W2, b2 = _unflatten(theta, sizes)
    z1 = X @ W1 + b1
    hid = torch.relu(z1)
    raw = hid @ W2 + b2
    logits = raw if logit_scale is None else raw * logit_scale
    logp = torch.log_softmax(logits, dim=1)
    n = X.shape[0]
    rows = _arange(n)
    loss = -logp[rows, y].mean() if with_loss else None
    dlogits = logp.exp()
    dlogits[rows, y] -= 1.0
    dlogits /= n
    if logit_scale is not None:
        dlogits = dlogits * logit_scale
    gW2 = hid.T @ dlogits
    gb2 = dlogits.sum(0)
    dhid = dlogits @ W2.T
    if decorr:
        reg, gh = decorr_loss_grad(hid, with_loss=with_loss)
        if with_loss:
            loss = loss + decorr * reg
        dhid = dhid + decorr * gh
    dz1 = dhid * (z1 > 0)
    gW1 = X.T @ dz1
    gb1 = dz1.sum(0)
    return (float(loss) if with_loss else None), torch.cat([gW1.reshape(-1), gb1, gW2.reshape(-1), gb2])


def mlp_loss_grad(theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor,
                  sizes: tuple[int, int, int] = (64, 128, 10), *, decorr: float = 0.0,
                  logit_scale: torch.Tensor | None = None) -> tuple[float, torch.Tensor]:
    """Mean cross-entropy over the batch and its gradient w.r.t. θ (P,).

    ``decorr`` = β > 0 adds FedDecorr's β·:func:`decorr_loss` of the hidden representation (its gradient by
    :func:`decorr_loss_grad`, then by hand through the ReLU); ``logit_scale`` (out,) multiplies the
    logits before the softmax (FedRS: α for the classes the client lacks, 1 else)."""
    loss, grad = _loss_grad(theta, X, y, sizes, decorr, logit_scale, True)
    return loss, grad


def mlp_grad(theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor, sizes: tuple[int, int, int] = (64, 128, 10), *,
             decorr: float = 0.0, logit_scale: torch.Tensor | None = None) -> torch.Tensor:
    """The gradient (P,) of :func:`mlp_loss_grad` alone (the same numbers; the loss, which the training loop does
    not read, is not computed)."""
    return _loss_grad(theta, X, y, sizes, decorr, logit_scale, False)[1]


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

    def grad(self, theta: torch.Tensor, idx: torch.Tensor, k: int = 0, *, decorr: float = 0.0,
             logit_scale: torch.Tensor | None = None) -> torch.Tensor:
        """Minibatch gradient (P,) of the mean cross-entropy on the training rows ``idx`` (+ FedDecorr's β
        ``decorr``, FedRS's ``logit_scale``: :func:`mlp_loss_grad`)."""
        return mlp_grad(theta, self.Xtr[idx], self.ytr[idx], self.sizes, decorr=decorr, logit_scale=logit_scale)

    def round_metrics(self, theta: torch.Tensor) -> tuple[float, float]:
        """(training loss, test accuracy in [0, 1])."""
        return mlp_metrics(theta, self.Xtr, self.ytr, self.sizes)[0], mlp_metrics(theta, self.Xte, self.yte,
                                                                                    self.sizes)[1]

    def final_metrics(self, theta: torch.Tensor) -> tuple[float, float]:
        """(test loss, test accuracy in [0, 1])."""
        return mlp_metrics(theta, self.Xte, self.yte, self.sizes)
