"""Exact top-k cosine searches over a block of rows, with a bfloat16 first pass where the CPU
multiplies bfloat16 natively.

The separation tests (steps 7–9, the gates of an incremental run, a cluster's confidence) ask
each report for its ten nearest outsiders: a product of the report with every row of its
partition, most of a clustering run's time below ``approximate_from``. A CPU with AVX-512 BF16
does that product in bfloat16 about three times as fast as in float32. bfloat16 scores are off
by up to a few thousandths, so they only pick *candidates*: each row's ``2k`` best, rescored in
float32. A row's answer is exact when its ``k``-th rescored candidate beats the best score any
pair left out could have (the last candidate's bfloat16 score plus the row's error bound). The
rows where it does not (near-ties in a dense region) take ``8k`` candidates, and the few still
unsure the float32 product. So the result is the float32 search's on every CPU, to float32
rounding, and only its speed differs: at 14,000 reports the first pass settled all but 2–4 %
of the rows, the second all but a handful.

The bound, for unit vectors ``x ≈ x̃`` (x̃ in bfloat16): ``|x̃·ỹ − x·y| ≤ ‖x̃ − x‖·‖ỹ‖ +
‖x‖·‖ỹ − y‖``, plus the product's float32 accumulation and the rounding of its result to bfloat16 (2⁻⁹
below 1, 2⁻⁸ from 1 on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

#: Candidates per row, as multiples of ``k``, each on the rows the one before left unsure.
CANDIDATES = (2, 8)
#: A bound on float32 accumulation over 384 dimensions (about 2.3e-5), with a margin.
_ACCUMULATION = 1e-4


def bfloat16_native() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (elsewhere bfloat16 is slower than float32)."""
    import torch

    probe = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    return bool(probe and probe())


class Scores:
    """The cosine scores of ``vectors`` (unit rows), searched a block of rows at a time."""

    def __init__(self, vectors: np.ndarray, low_precision: bool | None = None) -> None:
        import torch

        self.exact = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32))
        self.low: torch.Tensor | None = None
        if bfloat16_native() if low_precision is None else low_precision:  # None: as the CPU does best
            self.low = self.exact.to(torch.bfloat16)
            error = torch.linalg.vector_norm(self.low.float() - self.exact, dim=1)
            length = torch.linalg.vector_norm(self.exact, dim=1).max()
            self.slack = error * torch.linalg.vector_norm(self.low.float(), dim=1).max() + error.max() * length + _ACCUMULATION

    def block(self, rows: np.ndarray) -> torch.Tensor:
        """Scores of ``rows`` against every row (bfloat16 on the fast path): the caller masks
        the pairs it leaves out with ``-inf`` before :meth:`top`."""
        if self.low is None:
            return self.exact[rows] @ self.exact.T
        return self.low[rows] @ self.low.T

    def top(self, rows: np.ndarray, scores: torch.Tensor, k: int, columns: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``k`` largest exact scores of each row of ``scores`` (``rows``' block, pairs left
        out at ``-inf``) and their columns, best first; ``-inf`` where a row has fewer.
        ``columns``: the row each column of ``scores`` stands for, when ``scores`` is a
        gathered part of a block rather than the whole (default: column j is row j)."""
        import torch

        k = min(k, scores.shape[1])
        if self.low is None:
            values, at = torch.topk(scores, k, dim=1)
            return values, at if columns is None else torch.gather(columns, 1, at)
        rows_t = torch.from_numpy(np.asarray(rows))
        values, found, unsure = self._rescored(rows_t, scores, k, CANDIDATES[0] * k, columns)
        for width in [*(w * k for w in CANDIDATES[1:]), None]:
            if not bool(unsure.any()):
                break
            again = torch.nonzero(unsure).flatten()
            part = None if columns is None else columns[again]
            if width is None:  # a dense tie: the float32 product of these rows
                full = self.exact[rows_t[again]] @ self.exact.T
                exact = full if part is None else torch.gather(full, 1, part)
                exact[torch.isinf(scores[again])] = -float("inf")
                values[again], at = torch.topk(exact, k, dim=1)
                found[again] = at if part is None else torch.gather(part, 1, at)
                break
            values[again], found[again], still = self._rescored(rows_t[again], scores[again], k, width, part)
            unsure[again] = still
        return values, found

    def _rescored(self, rows: torch.Tensor, scores: torch.Tensor, k: int, width: int, columns: torch.Tensor | None
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The ``k`` best of each row's ``width`` best rough scores, rescored in float32, and
        whether a pair left out might beat them (its rough score plus the bound)."""
        import torch

        rough, picked = torch.topk(scores, min(width, scores.shape[1]), dim=1)
        found = picked if columns is None else torch.gather(columns, 1, picked)
        candidates = torch.index_select(self.exact, 0, found.flatten()).view(*found.shape, -1)
        rescored = torch.einsum("rcd,rd->rc", candidates, self.exact[rows])
        rescored[torch.isinf(rough)] = -float("inf")
        values, at = torch.topk(rescored, k, dim=1)
        last = rough[:, -1].float()
        bound = last + self.slack[rows] + torch.where(last < 1, 2.0**-9, 2.0**-8)
        complete = picked.shape[1] == scores.shape[1]  # every pair is a candidate
        return values, torch.gather(found, 1, at), ~torch.isinf(last) & (values[:, -1] < bound) & (not complete)
