"""The project's models served to lm-evaluation-harness: log-likelihoods in batches, CPU or GPU.

lm-eval asks for log P(continuation | context) and whether the continuation is the greedy one. Text is
encoded with the GPT-2 BPE the models trained on (encode_ordinary, as prepare does); as in lm-eval's own HF
adapter, trailing spaces of the context move to the continuation (BPE attaches a space to the next word) and
an empty context is the end-of-text token. A request longer than the model's context keeps its last
`context + 1` tokens (the continuation is never cut). On CUDA the blocks run under bf16 autocast; the LM
head and the log-softmax run in float32 (autocast off, full-precision fp32 matmuls: no TF32) on the last
hidden state, which every arm keeps in float32 under autocast (the residual stream, nGPT's normalised h), so
the logits are the ones a CPU computes from that state: bf16 logits (8 bits of mantissa) would move
near-tie choices against a CPU run.

Only log-likelihood tasks are served (every task of the paper's Table/figures is one); generation raises.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from lm_eval.api.model import LM

from ngptlab.errors import NgptlabError
from ngptlab.evaluate.tasks import EOT_TOKEN


class NgptlabLM(LM):
    def __init__(self, model: torch.nn.Module, encode: Callable[[str], list[int]], device: str = "cpu",
                 batch_size: int = 32, bf16: bool | None = None) -> None:
        """bf16: the blocks under bf16 autocast (default: on CUDA only)."""
        super().__init__()
        self.model = model.to(device).eval()
        self.encode, self.torch_device, self.batch_size = encode, torch.device(device), batch_size
        self.bf16 = self.torch_device.type == "cuda" if bf16 is None else bf16
        self.max_length = int(model.context)

    # -- the one computation: summed continuation log-probabilities of token pairs, in batches --------------

    def token_loglikelihoods(self, pairs: list[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        """(log P(cont | ctx), cont is greedy) for token-id pairs; longest first, so batches pad little."""
        order = sorted(range(len(pairs)), key=lambda k: -(len(pairs[k][0]) + len(pairs[k][1])))
        out: list[tuple[float, bool] | None] = [None] * len(pairs)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            for k, result in zip(chunk, self._batch([pairs[k] for k in chunk]), strict=True):
                out[k] = result
        return out  # type: ignore[return-value]

    @torch.no_grad()
    def _batch(self, pairs: list[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        rows, spans = [], []
        for ctx, cont in pairs:
            if not cont:
                raise NgptlabError("lm-eval asked for the log-likelihood of an empty continuation")
            whole = (ctx + cont)[-(self.max_length + 1):]
            rows.append(whole[:-1])
            spans.append((len(whole) - 1 - len(cont), cont))  # logits at these positions predict cont
        width = max(len(r) for r in rows)
        idx = torch.zeros(len(rows), width, dtype=torch.long)
        for i, r in enumerate(rows):
            idx[i, :len(r)] = torch.tensor(r)  # right padding: causal attention never sees it
        idx = idx.to(self.torch_device)
        # The LM head (the vocabulary) dominates the cost: apply it only where a continuation is predicted.
        rows_at = torch.tensor([i for i, (first, cont) in enumerate(spans) for _ in cont])
        cols_at = torch.tensor([first + j for first, cont in spans for j in range(len(cont))])
        with torch.autocast(self.torch_device.type, dtype=torch.bfloat16, enabled=self.bf16):
            hidden = self.model.hidden_states(idx)
        logprobs = F.log_softmax(self.head_fp32(hidden[rows_at.to(hidden.device), cols_at.to(hidden.device)]),
                                 dim=-1)
        results, offset = [], 0
        for _, cont in spans:
            lp = logprobs[offset:offset + len(cont)]
            offset += len(cont)
            target = torch.tensor(cont, device=lp.device)
            total = lp.gather(-1, target[:, None]).sum().item()
            results.append((float(total), bool((lp.argmax(-1) == target).all().item())))
        return results

    def head_fp32(self, hidden: torch.Tensor) -> torch.Tensor:
        """The model's logits of hidden states in float32: autocast off and fp32 matmuls at full precision."""
        precision = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest")
        try:
            with torch.autocast(self.torch_device.type, enabled=False):
                return self.model.head(hidden.float()).float()
        finally:
            torch.set_float32_matmul_precision(precision)

    # -- lm-eval's interface ---------------------------------------------------------------------------

    def encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        stripped = context.rstrip(" ")
        continuation = context[len(stripped):] + continuation
        ctx = self.encode(stripped) if stripped else [EOT_TOKEN]
        return ctx, self.encode(continuation)

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        return self.token_loglikelihoods([self.encode_pair(*req.args) for req in requests])

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """Whole-text log-likelihood in non-overlapping windows of the model's context (perplexity tasks)."""
        results = []
        for req in requests:
            tokens = self.encode(req.args[0])
            pairs, prev = [], [EOT_TOKEN]
            for start in range(0, len(tokens), self.max_length):
                pairs.append((prev, tokens[start:start + self.max_length]))
                prev = tokens[max(0, start + self.max_length - 1):start + self.max_length]
            results.append(sum(ll for ll, _ in self.token_loglikelihoods(pairs)))
        return results

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        raise NgptlabError("evaluate serves log-likelihood tasks only; a task in evaluate.tasks asks for "
                           "generated text (generate_until)")
