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
    "wrong_answers": {
        "replace": {"answers": '''
ANSWER_TOKENS = 64
ANSWER_CONV = "a"
ANSWER_SHUFFLE = "b"
'''},
        "fails": ["test_answer_tokens", "test_answer_conv", "test_answer_shuffle"],
    },
}

# Issue 29: every trivial function (zeros, identity, sign flip, a constant, an empty module, None) in
# place of each graded function and class: no test may give one a point.
MISTAKES.update(trivial_mistakes(Path(__file__).parent / "vit.ipynb"))
