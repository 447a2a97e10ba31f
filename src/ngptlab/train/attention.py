"""Which scaled-dot-product-attention kernel a run uses, and a second try on another after a non-finite step.

F.scaled_dot_product_attention (models/layers.py) picks a kernel per call among those enabled: on CUDA
flash, memory-efficient ("efficient"), cuDNN or math; on a CPU its flash kernel or math. The run records
the one torch picks for its training shapes (`attention_backend`: `backend`, `enabled`, `disabled`).

Why retry: fused kernels have produced non-finite gradients where others do not. On torch 2.13, cuDNN's
SDPA, which torch prefers on Hopper, has a bf16 backward that returns NaN grad_q while the forward and the
loss stay finite: huggingface/trl#7181 (DPO/KTO go NaN with the default backend on torch 2.13, clean with
enable_cudnn_sdp(False)), kyutai-labs/pocket-tts#264 (every gradient NaN at once on H100 at one batch
shape; the fix disables cuDNN SDPA), pytorch/pytorch#196678 (the kernel bug). The kernel is chosen by shape,
so a run can meet it at one context and not another.

A run must not be declared diverged for a kernel's fault, nor carry on silently. So a step whose loss or
gradient norm is non-finite (the update not applied: the loop reads both before optimizer.step) is computed
again from the same weights, optimizer state and batch, eagerly (torch.compiler.set_stance("force_eager"):
a compiled graph has its kernel baked in and ignores torch.nn.attention.sdpa_kernel), with the kernel it
used disabled. Finite then: the step is applied, the kernel stays disabled for the rest of the job, resumes
included (the compiled code is reset, so the next step recompiles, untimed), and the summary's
`nonfinite_retries` says so. Non-finite again, or no other kernel to try: the run diverges as before, and
the entry says that too.
"""

from __future__ import annotations

import contextlib

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

NAMES = {SDPBackend.FLASH_ATTENTION: "flash", SDPBackend.EFFICIENT_ATTENTION: "efficient",
         SDPBackend.CUDNN_ATTENTION: "cudnn", SDPBackend.MATH: "math"}
BY_NAME = {name: backend for backend, name in NAMES.items()}
_ENABLED = {"flash": torch.backends.cuda.flash_sdp_enabled,
            "efficient": torch.backends.cuda.mem_efficient_sdp_enabled,
            "cudnn": torch.backends.cuda.cudnn_sdp_enabled, "math": torch.backends.cuda.math_sdp_enabled}
CPU_KERNELS = ("flash", "math")  # a CPU has no memory-efficient or cuDNN kernel


class Attention:
    """The attention kernels of one job: what is enabled, what torch picks, what was disabled and why.

    `shape` (batch, heads, tokens, head dim) and `dtype` are the training calls' (the autocast dtype)."""

    def __init__(self, device: torch.device, shape: tuple[int, int, int, int], dtype: torch.dtype,
                 disabled: list[str] | None = None):
        self.device, self.shape, self.dtype = device, shape, dtype
        self.kernels = CPU_KERNELS if device.type == "cpu" else tuple(_ENABLED)
        self.disabled: list[str] = []
        self._stack = contextlib.ExitStack()  # the disabled kernels' settings, undone by close()
        for name in disabled or []:
            self.disable(name)

    def enabled(self) -> list[str]:
        return [name for name in self.kernels if _ENABLED[name]()]

    def chosen(self) -> str | None:
        """The kernel torch picks now for the training calls (None: none can run them)."""
        batch, heads, tokens, head_dim = self.shape  # laid out as models/layers.py's: [B, T, H, K].transpose
        q = torch.empty(batch, tokens, heads, head_dim, device=self.device, dtype=self.dtype).transpose(1, 2)
        q.requires_grad_(True)
        try:
            return NAMES.get(SDPBackend(torch._fused_sdp_choice(q, q, q, is_causal=True)))
        except (RuntimeError, ValueError):
            return None

    def record(self) -> dict:
        return {"backend": self.chosen(), "enabled": self.enabled(), "disabled": list(self.disabled)}

    def alternative(self, suspect: str | None) -> tuple[list[str], str | None]:
        """The kernels left once `suspect` is off, and the one torch would pick among them."""
        left = [name for name in self.enabled() if name != suspect]
        if not left:
            return left, None
        with sdpa_kernel([BY_NAME[name] for name in left]):
            return left, self.chosen()

    @contextlib.contextmanager
    def only(self, kernels: list[str]):
        """Run eagerly with only `kernels` enabled (a compiled graph would keep its own)."""
        with torch.compiler.set_stance("force_eager"), sdpa_kernel([BY_NAME[name] for name in kernels]):
            yield

    def disable(self, name: str) -> None:
        """Disable a kernel for the rest of the job (close() restores torch's settings)."""
        left = [BY_NAME[n] for n in self.enabled() if n != name]
        if left and name not in self.disabled:
            self._stack.enter_context(sdpa_kernel(left))
            self.disabled.append(name)

    def close(self) -> None:
        self._stack.close()
