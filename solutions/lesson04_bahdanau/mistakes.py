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
ANSWER_WEIGHTS_SHAPE = (4, 11, 9)
ANSWER_QUERY = "c"
ANSWER_EXTRA_PARAMS = 3 * 64 * 64  # counts a bias and a third matrix
ANSWER_ALIGNMENT = "c"
'''},
        "fails": ["test_answer_weights_shape", "test_answer_query", "test_answer_extra_params", "test_answer_alignment"],
    },
}

# Issue 29: every trivial function (zeros, identity, sign flip, a constant, an empty module, None) in
# place of each graded function and class: no test may give one a point.
MISTAKES.update(trivial_mistakes(Path(__file__).parent / "bahdanau.ipynb"))
