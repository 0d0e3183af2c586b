"""course_lib: the reference implementations of the attention and Transformers course.

One module per concept, in teaching order. ``import course_lib as cl`` gives the names the
lessons call as ``cl.<name>`` (listed below, by module); everything else is imported from its
module (``from course_lib.transformer import Transformer``), where each module's ``__all__``
says what it offers.

Lesson -> modules it teaches or first uses (later lessons reuse the earlier ones):

=======================================  ================================================
1a RNN encoder-decoder                    ``seq2seq``, ``data``, ``corpus``
1b training, decoding, BLEU               ``training``, ``decoding``, ``metrics``
2  attention pooling                      ``pooling``
3  scoring functions                      ``masking``, ``scoring``
4  Bahdanau attention                     ``seq2seq`` (the attention decoder)
5  multi-head attention                   ``multihead``
6  self-attention, positional encoding    ``positional``
7a the Transformer's architecture         ``transformer``
7b training the Transformer               ``transformer``, ``training``, ``decoding``
8  GPT and BERT                           ``gpt``
9  attention at scale                     ``flash``, ``rotary``, ``alibi``, ``gqa``,
                                          ``local_attention``
10 the Vision Transformer                 ``vit`` (import from the module: ``from course_lib.vit import ...``)
11 translation head to head               ``seq2seq``, ``transformer``, ``decoding``, ``metrics``
12 real sentences                         ``fra_eng`` (``load_sample``: the shipped Tatoeba pairs), ``bpe``
every lesson                              ``printing`` (``fmt``), ``plots`` (``from course_lib.plots import ...``)
=======================================  ================================================

Not tied to a lesson: ``checkpoints`` (save and load a model), ``tasks`` (synthetic copy
and date tasks, for tests), ``fra_eng``'s download of the whole Tatoeba file (for
``benchmarks/``) and ``d2l_compat`` (the d2l package, for parity tests). The autograder is
the package ``course_grader``.
"""

from __future__ import annotations

from typing import Any

from course_lib.flash import count_tiles, online_softmax, tiled_attention
from course_lib.gpt import GPT, GPTConfig
from course_lib.gqa import GroupedQueryAttention, kv_cache_bytes_per_token, repeat_kv
from course_lib.local_attention import layers_to_connect, sliding_window_attention, sliding_window_may_attend
from course_lib.masking import causal_may_attend, masked_softmax, valid_lens_to_may_attend, valid_lens_to_real_keys
from course_lib.multihead import KVCache, MultiHeadAttention, merge_heads, split_heads
from course_lib.positional import LearnedPositionalEmbedding, PositionalEncoding, shift_matrix, sinusoidal_encoding
from course_lib.printing import fmt
from course_lib.rotary import apply_rotary, rotary_cos_sin, rotary_frequencies
from course_lib.scoring import AdditiveAttention, DotProductAttention, scaled_dot_product_attention
from course_lib.training import setup_lesson

# The one version string of the distribution (pyproject.toml reads it; `course-grade` prints it).
__version__ = "0.2.0"

# ``course_lib.plots`` is not imported here: it pulls in matplotlib.pyplot, slow to import and
# not needed by the autograder's sandbox. Lessons import it themselves
# (``from course_lib.plots import attention_heatmap``).

__all__ = sorted([
    "count_tiles", "online_softmax", "tiled_attention",  # flash
    "GPT", "GPTConfig",  # gpt
    "GroupedQueryAttention", "kv_cache_bytes_per_token", "repeat_kv",  # gqa
    "layers_to_connect", "sliding_window_attention", "sliding_window_may_attend",  # local_attention
    "causal_may_attend", "masked_softmax", "valid_lens_to_may_attend", "valid_lens_to_real_keys",  # masking
    "KVCache", "MultiHeadAttention", "merge_heads", "split_heads",  # multihead
    "LearnedPositionalEmbedding", "PositionalEncoding", "shift_matrix", "sinusoidal_encoding",  # positional
    "fmt",  # printing
    "apply_rotary", "rotary_cos_sin", "rotary_frequencies",  # rotary
    "AdditiveAttention", "DotProductAttention", "scaled_dot_product_attention",  # scoring
    "setup_lesson",  # training: every lesson's first cell
])


def __getattr__(name: str) -> Any:
    from course_lib.masking import _RENAMED, renamed_error

    if name in _RENAMED:
        raise renamed_error(name, "course_lib")
    raise AttributeError(f"module 'course_lib' has no attribute {name!r}")
