"""Typical mistakes for lesson10_vit, used by tests/test_grading_assignments.py.

Each entry: a learner notebook is built from the SOLUTION by replacing the source of the
cells named in ``replace`` (by nbgrader grade_id); grading it must fail (at least) the
tests in ``fails`` and pass every test not listed in ``fails`` or ``may_fail``, under every
seed (tests/test_grading_fairness.py). ``"public": True`` marks the common mistakes that the
public checks alone (the learner's ``course-grade --check``) must catch.
"""

from pathlib import Path

from course_tools.grading_dev.testing import trivial_mistakes


def _patchify(body: str) -> str:
    return f'''
def patchify(images, patch_size):
    B, C, height, width = images.shape
    P = patch_size
{body}
'''


def _embedding(kernels: str) -> str:
    return f'''
class PatchEmbedding(nn.Module):
    def __init__(self, patch_size, in_channels, d_model):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Linear(in_channels * patch_size * patch_size, d_model)

    def forward(self, images):
        return self.proj(patchify(images, self.patch_size))


def conv_weight_from_linear(weight, patch_size, in_channels):
    E, P, C = weight.shape[0], patch_size, in_channels
    return {kernels}
'''


def _tokens(init: str, forward: str) -> str:
    return f'''
class ClassTokenAndPositions(nn.Module):
    def __init__(self, num_patches, d_model):
        super().__init__()
{init}

    def forward(self, X):
{forward}
'''


_CLS = "        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, d_model))"
_POS = "        self.pos_embedding = nn.Parameter(0.02 * torch.randn(1, num_patches + 1, d_model))"
_CAT = "        cls = self.cls_token.expand(X.shape[0], -1, -1)\n"


def _head(forward: str) -> str:
    return f'''
class ClassifierHead(nn.Module):
    def __init__(self, d_model, num_classes, pool="cls"):
        super().__init__()
        self.pool = pool
        self.norm = nn.LayerNorm(d_model)
        self.linear = nn.Linear(d_model, num_classes)

    def forward(self, states):
{forward}
'''


_EMBEDDING_TESTS = ["test_embedding_public", "test_embedding"]
_GRID = '''
def grid_sincos_embedding(rows, cols, d_model):
    if d_model % 4:
        raise ValueError(f"grid_sincos_embedding: d_model must be a multiple of 4, got {d_model}")
    half = d_model // 2

    def table(num_positions):
        positions = torch.arange(num_positions, dtype=torch.float64)[:, None]
        freqs = 10000.0 ** (-torch.arange(0, half, 2, dtype=torch.float64) / half)
        out = torch.zeros(num_positions, half, dtype=torch.float64)
        out[:, 0::2] = torch.sin(positions * freqs)
        out[:, 1::2] = torch.cos(positions * freqs)
        return out

    n = torch.arange(rows * cols)
    return torch.cat([table(rows)[n // cols], table(cols)[n % cols]], dim=-1).to(torch.float32)
'''

_EXPERIMENT = '''
from course_lib.vit import ViTConfig, VisionTransformer


def shuffle_change(position_embedding):
    seed, size, P = VARIANT["exp_seed"], VARIANT["exp_size"], VARIANT["exp_patch"]
    torch.manual_seed(seed)
    model = VisionTransformer(ViTConfig(image_size=(size, size), patch_size=P, d_model=32, num_heads=4, d_ff=64,
                                        num_layers=2, position_embedding=position_embedding)).eval()
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(4, 1, size, size, generator=g)
    r = size // P
    perm = torch.randperm(r * r, generator=g)
    grid = images.reshape(4, 1, r, P, r, P).permute(0, 2, 4, 1, 3, 5).reshape(4, r * r, 1, P, P)
    shuffled = grid[:, perm].reshape(4, r, r, 1, P, P).permute(0, 3, 1, 4, 2, 5).reshape(4, 1, size, size)
    with torch.no_grad():
        return float((model(shuffled) - model(images)).abs().max())


ANSWER_SHUFFLE_WITH = shuffle_change(True)
ANSWER_SHUFFLE_WITHOUT = shuffle_change(False)
'''


MISTAKES = {
    "patches_by_reshape_only": {
        # cuts the image into runs of C P^2 consecutive values (pieces of rows), not into squares
        "replace": {"patchify": _patchify("    return images.reshape(B, (height // P) * (width // P), C * P * P)")},
        "fails": ["test_patchify_public", "test_patchify", *_EMBEDDING_TESTS],
        "hint": "your patches equal a reshape without the permute, which mixes pixels of different patches: reshape, permute, then flatten",
        "lesson": "10",
        "section": 2,
        "public": True,
    },
    "patches_column_by_column": {
        "replace": {"patchify": _patchify(
            "    grid = images.reshape(B, C, height // P, P, width // P, P)\n"
            "    return grid.permute(0, 4, 2, 1, 3, 5).reshape(B, -1, C * P * P)")},
        "fails": ["test_patchify_public", "test_patchify", *_EMBEDDING_TESTS],
        "public": True,
    },
    "height_and_width_swapped": {
        "replace": {"patchify": _patchify(
            "    grid = images.reshape(B, C, width // P, P, height // P, P)\n"
            "    return grid.permute(0, 2, 4, 1, 3, 5).reshape(B, -1, C * P * P)")},
        "fails": ["test_patchify_public", "test_patchify", *_EMBEDDING_TESTS],
        "public": True,
    },
    "patch_flattened_channels_last": {
        # (P, P, C) order: the same as (C, P, P) for one channel, so only the hidden tests see it
        "replace": {"patchify": _patchify(
            "    grid = images.reshape(B, C, height // P, P, width // P, P)\n"
            "    return grid.permute(0, 2, 4, 3, 5, 1).reshape(B, -1, C * P * P)")},
        "fails": ["test_patchify", "test_embedding"],
    },
    "conv_kernel_transposed": {
        "replace": {"patch_embedding": _embedding("weight.reshape(E, C, P, P).transpose(-1, -2)")},
        "fails": _EMBEDDING_TESTS,
        "public": True,
    },
    "conv_kernel_channels_last": {
        "replace": {"patch_embedding": _embedding("weight.reshape(E, P, P, C).permute(0, 3, 1, 2)")},
        "fails": ["test_embedding"],
    },
    "class_token_appended_at_the_end": {
        "replace": {"class_token": _tokens(_CLS + "\n" + _POS,
                                           _CAT + "        return torch.cat([X, cls], dim=1) + self.pos_embedding")},
        "fails": ["test_tokens_public", "test_tokens"],
        "hint": "your tokens equal the class token placed after the patches: put it in front, at position 0",
        "lesson": "10",
        "section": 4,
        "public": True,
    },
    "class_token_not_a_parameter": {
        "replace": {"class_token": _tokens("        self.cls_token = 0.02 * torch.randn(1, 1, d_model)\n" + _POS,
                                           _CAT + "        return torch.cat([cls, X], dim=1) + self.pos_embedding")},
        "fails": ["test_tokens_public", "test_tokens"],
        "public": True,
    },
    "positions_only_for_the_patches": {
        "replace": {"class_token": _tokens(
            _CLS + "\n        self.pos_embedding = nn.Parameter(0.02 * torch.randn(1, num_patches, d_model))",
            _CAT + "        return torch.cat([cls, X + self.pos_embedding], dim=1)")},
        "fails": ["test_tokens_public", "test_tokens"],
        "hint": "your tokens equal positions added to the patches only: the class token gets a position too (N + 1 positions)",
        "lesson": "10",
        "section": 4,
        "public": True,
    },
    "head_reads_the_last_token": {
        "replace": {"classifier_head": _head(
            "        states = self.norm(states)\n"
            "        pooled = states[:, -1] if self.pool == 'cls' else states.mean(dim=1)\n"
            "        return self.linear(pooled)")},
        "fails": ["test_head_public", "test_head"],
        "public": True,
    },
    "head_without_layer_norm": {
        "replace": {"classifier_head": _head(
            "        pooled = states[:, 0] if self.pool == 'cls' else states.mean(dim=1)\n"
            "        return self.linear(pooled)")},
        "fails": ["test_head_public", "test_head"],
        "hint": "your head equals one without the final LayerNorm: normalise the read-out before the linear layer",
        "lesson": "10",
        "section": 5,
        "public": True,
    },
    "mean_pooled_before_the_layer_norm": {
        # the same for the class token (LayerNorm acts on each token alone), not for the mean
        "replace": {"classifier_head": _head(
            "        pooled = states[:, 0] if self.pool == 'cls' else states.mean(dim=1)\n"
            "        return self.linear(self.norm(pooled))")},
        "fails": ["test_head_public", "test_head"],
        "public": True,
    },
    "head_returns_probabilities": {
        "replace": {"classifier_head": _head(
            "        states = self.norm(states)\n"
            "        pooled = states[:, 0] if self.pool == 'cls' else states.mean(dim=1)\n"
            "        return torch.softmax(self.linear(pooled), dim=-1)")},
        "fails": ["test_head_public", "test_head"],
        "hint": "your head returns probabilities (a softmax): return the logits, the loss applies the softmax",
        "lesson": "10",
        "section": 5,
        "public": True,
    },
    "grid_rows_and_columns_swapped": {
        # the first half encodes the column, the second the row
        "replace": {"grid_embedding": _GRID.replace("[table(rows)[n // cols], table(cols)[n % cols]]",
                                                    "[table(cols)[n % cols], table(rows)[n // cols]]")},
        "fails": ["test_grid_public", "test_grid"],
        "hint": "your embedding equals one whose first half encodes the grid column: the first half is the row "
                "(n // cols), the second the column (n % cols)",
        "lesson": "10",
        "section": 4,
        "public": True,
    },
    "grid_patch_index_1d": {
        # lesson 6's 1D encoding of the patch number n over all E features: no grid at all
        "replace": {"grid_embedding": _GRID.replace(
            "return torch.cat([table(rows)[n // cols], table(cols)[n % cols]], dim=-1).to(torch.float32)",
            "half = d_model\n    return table(rows * cols).to(torch.float32)")},
        "fails": ["test_grid_public", "test_grid"],
        "hint": "your embedding equals the 1D sinusoidal encoding of the patch number: encode the grid row in the "
                "first half and the grid column in the second, each with model size E / 2",
        "lesson": "10",
        "section": 4,
        "public": True,
    },
    "grid_frequencies_of_full_size": {
        # the frequencies of a table of size E instead of E / 2
        "replace": {"grid_embedding": _GRID.replace("dtype=torch.float64) / half)", "dtype=torch.float64) / d_model)")},
        "fails": ["test_grid"],
        "hint": "your embedding equals one whose frequencies use the full model size E: each half is a table of "
                "model size E / 2, so its exponents are 2i / (E / 2)",
        "lesson": "10",
        "section": 4,
        "may_fail": ["test_grid_public"],
    },
    "grid_accepts_any_size": {
        "replace": {"grid_embedding": _GRID.replace(
            "    if d_model % 4:\n        raise ValueError(f\"grid_sincos_embedding: d_model must be a multiple of 4, got {d_model}\")\n",
            "")},
        "fails": ["test_grid_public"],
        "public": True,
    },
    "experiment_shuffles_rows_of_pixels": {
        # pixel rows shuffled instead of patches
        "replace": {"experiment": _EXPERIMENT.replace(
            "    shuffled = grid[:, perm].reshape(4, r, r, 1, P, P).permute(0, 3, 1, 4, 2, 5).reshape(4, 1, size, size)\n",
            "    shuffled = images[:, :, torch.randperm(size, generator=g)]\n")},
        "fails": ["test_experiment"],
    },
    "wrong_answers": {
        "replace": {"answers": '''
ANSWER_TOKENS = (VARIANT["q_size"] // VARIANT["q_patch"]) ** 2  # the class token forgotten
ANSWER_CONV = "a"
ANSWER_SHUFFLE = "b"
'''},
        "fails": ["test_answer_tokens", "test_answer_conv", "test_answer_shuffle"],
    },
}

# Issue 29: every trivial function (zeros, identity, sign flip, a constant, an empty module, None) in
# place of each graded function and class: no test may give one a point.
MISTAKES.update(trivial_mistakes(Path(__file__).parent / "vit.ipynb"))
