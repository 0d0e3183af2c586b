"""course_lib: the reference implementations of the attention and Transformers course.

One module per concept, in teaching order; everything public is re-exported here so
that notebooks can write ``import course_lib as cl`` and ``cl.masked_softmax(...)``.
"""

from __future__ import annotations

from course_lib.masking import (
    causal_mask,
    key_padding_mask_to_valid_lens,
    masked_softmax,
    valid_lens_to_key_padding_mask,
    valid_lens_to_mask,
)
from course_lib.scoring import AdditiveAttention, DotProductAttention, scaled_dot_product_attention
from course_lib.multihead import MultiHeadAttention, merge_heads, split_heads
from course_lib.positional import (
    LearnedPositionalEmbedding,
    PositionalEncoding,
    shift_matrix,
    sinusoidal_encoding,
)

__version__ = "0.1.0"
