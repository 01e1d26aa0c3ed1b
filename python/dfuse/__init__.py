"""dfuse: fused kernels for diffusion models, bit-exact against the PyTorch eager chains they replace.

The PyTorch ops are C++ custom ops, ``torch.ops.dfuse.*``; ``dfuse.torch`` loads them and names them.
"""

from dfuse import torch  # noqa: F401  (registers torch.ops.dfuse; never rebind the name ``torch`` here)
