"""Kasai et al.'s T2R as the paper writes it, for one attention head: the listing docs/t2r.md reads.

Softmax attention weighs key j by exp(q·k_j/√d); T2R weighs it by φ(q)·φ(k_j), with one learned map
φ(x) = ReLU(W x + b) for queries and keys alike. t2r/linear.py computes the same for every head at once,
in blocks, with the successors' additions (exact rows, a decay, φ before RoPE) and a floor under the
denominator (here a query whose features are all off where z's are on, φ(q)·z = 0, gives 0/0: NaN);
tests/test_t2r.py holds it equal to these two functions in float64.
"""
import torch


def phi(x, W, b):
    """The feature map: x (.., hd), W (r, hd), b (r,) -> (.., r) features, none negative."""
    return torch.relu(x @ W.T + b)


def transformer_view(q, k, v, W, b):
    """Every position at once, O(T²): q, k, v (T, hd) -> (T, hd). Query i weighs each key j <= i by
    φ(q_i)·φ(k_j) and divides by the sum of its weights."""
    T = q.shape[0]
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()  # (T, T) key j <= query i
    A = (phi(q, W, b) @ phi(k, W, b).T) * causal                     # (T, T) the weights
    return A @ v / A.sum(-1, keepdim=True)                           # (T, hd)


def rnn_view(q, k, v, W, b):
    """Token by token, from a state whose size never changes: S = Σ φ(k_j) v_jᵀ (r, hd), z = Σ φ(k_j) (r,)."""
    S, z, out = 0, 0, []
    for q_t, k_t, v_t in zip(q, k, v):                               # (hd,) each
        S = S + torch.outer(phi(k_t, W, b), v_t)                     # the token joins the sums ...
        z = z + phi(k_t, W, b)
        f = phi(q_t, W, b)                                           # (r,)
        out.append(f @ S / (f @ z))                                  # ... before its query reads them
    return torch.stack(out)                                          # (T, hd)
