"""Typical mistakes for lesson04_bahdanau, used by tests/test_grading_assignments.py.

Each entry: a learner notebook is built from the SOLUTION by replacing the source of the
cells named in ``replace`` (by nbgrader grade_id); grading it must fail (at least) the
tests in ``fails`` and pass every test not listed in ``fails`` or ``may_fail``, under every
seed (tests/test_grading_fairness.py). ``"public": True`` marks the common mistakes that the
public checks alone (the learner's ``course-grade --check``) must catch.
"""

from pathlib import Path

from course_tools.grading_dev.testing import trivial_mistakes

_INIT = '''
class BahdanauDecoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
        super().__init__()
        self.attention = AdditiveAttention(num_hiddens, num_hiddens, num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.attention_weights = None

    def init_state(self, enc_outputs, enc_state, src_valid_lens):
        return (enc_outputs, enc_state, src_valid_lens)
'''


def _forward(query: str, valid_lens: str = "src_valid_lens") -> str:
    return _INIT + f'''
    def forward(self, tokens, state):
        enc_outputs, hidden, src_valid_lens = state
        first_hidden = hidden
        embedded = self.embedding(tokens)
        outputs, weights = [], []
        for t in range(tokens.shape[1]):
            query = {query}
            context = self.attention(query, enc_outputs, enc_outputs, {valid_lens})
            weights.append(self.attention.attention_weights)
            out, hidden = self.rnn(torch.cat([embedded[:, t:t + 1], context], dim=-1), hidden)
            outputs.append(out)
        self.attention_weights = torch.cat(weights, dim=1)
        return self.dense(torch.cat(outputs, dim=1)), (enc_outputs, hidden, src_valid_lens)
'''


_BI_INIT = '''
class BiGRUEncoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens // 2, num_layers, batch_first=True, bidirectional=True,
                          dropout=dropout if num_layers > 1 else 0.0)
'''


def _bi_forward(final_state: str) -> str:
    """The solution's encoder with another expression of the (2N, B, h/2) final ``state`` as the (N, B, h) one."""
    return _BI_INIT + f'''
    def forward(self, src, src_valid_lens):
        packed = nn.utils.rnn.pack_padded_sequence(self.embedding(src), src_valid_lens.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        packed_out, state = self.rnn(packed)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(packed_out, batch_first=True, total_length=src.shape[1])
        return outputs, {final_state}
'''


MISTAKES = {
    # Luong-style order: the GRU steps first (with the previous context), then the NEW state queries.
    "query_is_current_state": {
        "replace": {"bahdanau_decoder": _INIT + '''
    def forward(self, tokens, state):
        enc_outputs, hidden, src_valid_lens = state
        embedded = self.embedding(tokens)
        context = torch.zeros(tokens.shape[0], 1, hidden.shape[-1])
        outputs, weights = [], []
        for t in range(tokens.shape[1]):
            out, hidden = self.rnn(torch.cat([embedded[:, t:t + 1], context], dim=-1), hidden)
            context = self.attention(hidden[-1].unsqueeze(1), enc_outputs, enc_outputs, src_valid_lens)
            weights.append(self.attention.attention_weights)
            outputs.append(out)
        self.attention_weights = torch.cat(weights, dim=1)
        return self.dense(torch.cat(outputs, dim=1)), (enc_outputs, hidden, src_valid_lens)
'''},
        "fails": ["test_decoder_public", "test_decoder_step", "test_decoder_in_model"],
        "hint": "your decoder equals one whose query is the hidden state after step t: the query is the state left by step t-1",
        "lesson": "4",
        "section": 2,
        "public": True,
    },
    # The query is never updated: the encoder's final state at every step.
    "query_never_updated": {
        "replace": {"bahdanau_decoder": _forward("first_hidden[-1].unsqueeze(1)")},
        "fails": ["test_decoder_public", "test_decoder_step", "test_decoder_in_model"],
        "hint": "your decoder equals one that queries with the encoder's final state at every step: update the query with the decoder's new state after each step",
        "lesson": "4",
        "section": 2,
        "public": True,
    },
    "query_from_bottom_layer": {
        "replace": {"bahdanau_decoder": _forward("hidden[0].unsqueeze(1)")},
        "fails": ["test_decoder_public", "test_decoder_step", "test_decoder_in_model"],
        "hint": "your decoder equals one that queries with the bottom GRU layer's state: use the top layer's (hidden[-1])",
        "lesson": "4",
        "section": 2,
        "public": True,
    },
    "valid_lens_ignored": {
        "replace": {"bahdanau_decoder": _forward("hidden[-1].unsqueeze(1)", valid_lens="None")},
        "fails": ["test_decoder_public", "test_decoder_step", "test_decoder_in_model", "test_decoder_masking"],
        "hint": "your decoder equals one that attends to the padded source tokens: pass the source's valid lengths to the attention",
        "lesson": "4",
        "section": 2,
        "public": True,
    },
    # The GRU reads the embedding only; the context joins its output before the dense layer.
    "context_after_gru": {
        "replace": {"bahdanau_decoder": '''
class BahdanauDecoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
        super().__init__()
        self.attention = AdditiveAttention(num_hiddens, num_hiddens, num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.dense = nn.Linear(2 * num_hiddens, vocab_size)
        self.attention_weights = None

    def init_state(self, enc_outputs, enc_state, src_valid_lens):
        return (enc_outputs, enc_state, src_valid_lens)

    def forward(self, tokens, state):
        enc_outputs, hidden, src_valid_lens = state
        embedded = self.embedding(tokens)
        outputs, weights = [], []
        for t in range(tokens.shape[1]):
            context = self.attention(hidden[-1].unsqueeze(1), enc_outputs, enc_outputs, src_valid_lens)
            weights.append(self.attention.attention_weights)
            out, hidden = self.rnn(embedded[:, t:t + 1], hidden)
            outputs.append(torch.cat([out, context], dim=-1))
        self.attention_weights = torch.cat(weights, dim=1)
        return self.dense(torch.cat(outputs, dim=1)), (enc_outputs, hidden, src_valid_lens)
'''},
        "fails": ["test_decoder_public", "test_decoder_step", "test_decoder_in_model"],
        "public": True,
    },
    # Attends once, before the loop, and reuses that context at every step.
    "context_computed_once": {
        "replace": {"bahdanau_decoder": _INIT + '''
    def forward(self, tokens, state):
        enc_outputs, hidden, src_valid_lens = state
        embedded = self.embedding(tokens)
        context = self.attention(hidden[-1].unsqueeze(1), enc_outputs, enc_outputs, src_valid_lens)
        context = context.expand(-1, tokens.shape[1], -1)
        outputs, hidden = self.rnn(torch.cat([embedded, context], dim=-1), hidden)
        self.attention_weights = self.attention.attention_weights.expand(-1, tokens.shape[1], -1)
        return self.dense(outputs), (enc_outputs, hidden, src_valid_lens)
'''},
        "fails": ["test_decoder_public", "test_decoder_step", "test_decoder_in_model"],
        "public": True,
    },
    "wrong_answers": {
        "replace": {"answers": '''
ANSWER_WEIGHTS_SHAPE = (VARIANT["q_B"], VARIANT["q_S"], VARIANT["q_L"])
ANSWER_QUERY = "c"
ANSWER_EXTRA_PARAMS = 3 * VARIANT["extra_h"] ** 2  # counts a bias and a third matrix
ANSWER_ALIGNMENT = "c"
'''},
        "fails": ["test_answer_weights_shape", "test_answer_query", "test_answer_extra_params", "test_answer_alignment"],
    },
    # The bidirectional encoder run over the padded batch: the backward GRU starts in the padding.
    "bi_encoder_not_packed": {
        "replace": {"bi_encoder": _BI_INIT + '''
    def forward(self, src, src_valid_lens):
        outputs, state = self.rnn(self.embedding(src))
        outputs = outputs.masked_fill((torch.arange(src.shape[1])[None, :] >= src_valid_lens[:, None])[:, :, None], 0.0)
        layers, batch, half = state.shape[0] // 2, state.shape[1], state.shape[2]
        state = state.view(layers, 2, batch, half)
        return outputs, torch.cat([state[:, 0], state[:, 1]], dim=-1)
'''},
        "fails": ["test_bi_encoder_public", "test_bi_encoder"],
        "hint": "your encoder equals one that runs the GRU over the padding, so the backward direction starts at the pads: "
                "pack the batch with the valid lengths (pack_padded_sequence)",
        "lesson": "1a",
        "section": 5,
        "public": True,
    },
    # PyTorch's (2N, B, h/2) final state reshaped straight to (N, B, h): halves of different rows side by side.
    "bi_state_reshaped": {
        "replace": {"bi_encoder": _bi_forward("state.reshape(state.shape[0] // 2, state.shape[1], 2 * state.shape[2])")},
        "fails": ["test_bi_encoder_public", "test_bi_encoder"],
        "hint": "your final state equals PyTorch's (2N, B, h/2) state reshaped straight to (N, B, h), which puts halves "
                "of different sentences side by side: view it as (N, 2, B, h/2), then join each layer's two directions",
        "lesson": "4",
        "section": 7,
        "public": True,
    },
    # The first N final states taken as the forward ones: right for one layer only (PyTorch interleaves them).
    "bi_state_wrong_pairs": {
        "replace": {"bi_encoder": _bi_forward("torch.cat([state[:state.shape[0] // 2], state[state.shape[0] // 2:]], dim=-1)")},
        "fails": ["test_bi_encoder_public", "test_bi_encoder"],
        "hint": "your final state pairs the wrong halves: PyTorch orders it layer 0 forward, layer 0 backward, layer 1 "
                "forward, ..., not all forward layers first; view it as (N, 2, B, h/2)",
        "lesson": "4",
        "section": 7,
        "public": True,
    },
    # Packing that requires the rows sorted by length: the batch of the checks is not sorted.
    "bi_encoder_needs_sorted": {
        "replace": {"bi_encoder": _BI_INIT + '''
    def forward(self, src, src_valid_lens):
        packed = nn.utils.rnn.pack_padded_sequence(self.embedding(src), src_valid_lens.cpu(), batch_first=True)
        packed_out, state = self.rnn(packed)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(packed_out, batch_first=True, total_length=src.shape[1])
        layers, batch, half = state.shape[0] // 2, state.shape[1], state.shape[2]
        state = state.view(layers, 2, batch, half)
        return outputs, torch.cat([state[:, 0], state[:, 1]], dim=-1)
'''},
        "fails": ["test_bi_encoder_public", "test_bi_encoder"],
        "public": True,
    },
    # The experiment: entropies in bits, and the uniform bound over all S = 8 positions instead of the real ones.
    "experiment_bits_and_padding": {
        "replace": {"answers_experiment": '''
def mean_entropy(scale):
    dec = copy.deepcopy(exp_decoder)
    with torch.no_grad():
        dec.attention.w_v.weight.mul_(scale)
        dec(exp_tokens, dec.init_state(exp_enc_outputs, exp_enc_state, exp_lens))
    weights = dec.attention_weights
    return float(-(torch.special.xlogy(weights, weights) / math.log(2)).sum(dim=-1).mean())


ANSWER_ENTROPY = mean_entropy(1.0)
ANSWER_ENTROPY_SCALED = mean_entropy(exp_scale)
ANSWER_ENTROPY_UNIFORM = math.log(8)
'''},
        "fails": ["test_experiment_entropy"],
    },
}

# Issue 29: every trivial function (zeros, identity, sign flip, a constant, an empty module, None) in
# place of each graded function and class: no test may give one a point.
MISTAKES.update(trivial_mistakes(Path(__file__).parent / "bahdanau.ipynb"))
