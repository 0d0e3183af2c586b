"""Typical mistakes for lesson01_seq2seq, used by tests/test_grading_assignments.py.

Each entry: a learner notebook is built from the SOLUTION by replacing the source of the
cells named in ``replace`` (by nbgrader grade_id); grading it must fail (at least) the
tests in ``fails`` and pass every test not listed in ``fails`` or ``may_fail``, under every
seed (tests/test_grading_fairness.py). ``"public": True`` marks the common mistakes that the
public checks alone (the learner's ``course-grade --check``) must catch.
"""

from pathlib import Path

from course_tools.grading_dev.testing import trivial_mistakes

_ENCODER_INIT = '''
class Seq2SeqEncoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)
'''

_DECODER_INIT = '''
class Seq2SeqDecoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.dense = nn.Linear(num_hiddens, vocab_size)
'''

_GREEDY_HEAD = '''
def greedy_decode(model, src, src_valid_lens, bos_id, eos_id, max_len):
    batch = src.shape[0]
    tokens = [[] for _ in range(batch)]
    done = [False] * batch
    with torch.no_grad():
        state = model.encode(src, src_valid_lens)
        prev = torch.full((batch,), bos_id, dtype=torch.long)
'''

_BLEU_HEAD = '''
def bleu(pred_tokens, label_tokens, k):
    len_pred, len_label = len(pred_tokens), len(label_tokens)
'''

def _sampling(read: str) -> str:
    """The solution's scheduled sampling with another expression of what step t >= 1 reads."""
    return f'''
def scheduled_sampling_logits(model, src, src_valid_lens, tgt_in, use_reference):
    state = model.encode(src, src_valid_lens)
    prev = tgt_in[:, 0]
    steps = []
    for t in range(tgt_in.shape[1]):
        if t > 0:
            guess = steps[-1].argmax(dim=-1)
            prev = {read}
        logits, state = model.decode_step(prev, state)
        steps.append(logits)
    return torch.stack(steps, dim=1)
'''


# Issue 19 audit: "greedy_one_row_at_a_time" and "greedy_runs_to_max_len" (right tokens, but one
# decode_step call per row, or calls after every row stopped) were caught only through
# ScriptedModel.calls, a list kept by a learner-editable object inside the learner's own process
# (greedy_decode itself can rewrite it). The grader no longer scores that evidence, so these two
# are not graded mistakes any more; the lesson's text still asks for batched decoding.

MISTAKES = {
    # D2L's encoder: the GRU also reads the pads, and the "final" state is the one after them.
    "encoder_reads_padding": {
        "replace": {"encoder": _ENCODER_INIT + '''
    def forward(self, src, src_valid_lens):
        outputs, state = self.rnn(self.embedding(src))
        return outputs, state
'''},
        "fails": ["test_encoder_public", "test_encoder"],
        "hint": "your encoder's state equals one that also read the padding: pack the padded batch (pack_padded_sequence) so each sentence stops at its last real token",
        "lesson": "1a",
        "section": 5,
        "public": True,
    },
    # The state of a padded row taken as its top-layer output at the last real token, for every layer.
    "encoder_state_from_outputs": {
        "replace": {"encoder": _ENCODER_INIT + '''
    def forward(self, src, src_valid_lens):
        packed = nn.utils.rnn.pack_padded_sequence(self.embedding(src), src_valid_lens.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        packed_outputs, _ = self.rnn(packed)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(packed_outputs, batch_first=True, total_length=src.shape[1])
        last = outputs[torch.arange(src.shape[0]), src_valid_lens - 1]  # (B, h)
        state = last.unsqueeze(0).repeat(self.rnn.num_layers, 1, 1)  # every layer gets the top layer's state
        return outputs, state
'''},
        "fails": ["test_encoder"],
    },
    "context_from_bottom_layer": {
        "replace": {"decoder": _DECODER_INIT + '''
    def init_state(self, enc_outputs, enc_state):
        return (enc_state[0], enc_state)

    def forward(self, tgt_in, state):
        context, hidden = state
        embedded = self.embedding(tgt_in)
        context_seq = context.unsqueeze(1).expand(-1, tgt_in.shape[1], -1)
        outputs, hidden = self.rnn(torch.cat([embedded, context_seq], dim=-1), hidden)
        return self.dense(outputs), (context, hidden)
'''},
        "fails": ["test_decoder"],
        "public": True,  # the public part of test_decoder (one example with course_lib's weights) catches it
    },
    "decoder_hidden_starts_at_zero": {
        "replace": {"decoder": _DECODER_INIT + '''
    def init_state(self, enc_outputs, enc_state):
        return (enc_state[-1], enc_state)

    def forward(self, tgt_in, state):
        context, hidden = state
        embedded = self.embedding(tgt_in)
        context_seq = context.unsqueeze(1).expand(-1, tgt_in.shape[1], -1)
        outputs, hidden = self.rnn(torch.cat([embedded, context_seq], dim=-1))  # forgot the encoder's state
        return self.dense(outputs), (context, hidden)
'''},
        "fails": ["test_decoder_public", "test_decoder"],
        "hint": "your decoder's outputs equal a GRU started from zeros: start it from the encoder's final state",
        "lesson": "1a",
        "section": 5,
        "public": True,
    },
    "decoder_context_only_at_first_step": {
        "replace": {"decoder": _DECODER_INIT + '''
    def init_state(self, enc_outputs, enc_state):
        return (enc_state[-1], enc_state)

    def forward(self, tgt_in, state):
        context, hidden = state
        embedded = self.embedding(tgt_in)
        context_seq = torch.zeros(tgt_in.shape[0], tgt_in.shape[1], context.shape[-1])
        context_seq[:, 0] = context  # the context is read at the first step only
        outputs, hidden = self.rnn(torch.cat([embedded, context_seq], dim=-1), hidden)
        return self.dense(outputs), (context, hidden)
'''},
        "fails": ["test_decoder_public", "test_decoder"],
        "public": True,
    },
    "greedy_does_not_stop_at_eos": {
        "replace": {"greedy_decode": _GREEDY_HEAD + '''
        for _ in range(max_len):
            logits, state = model.decode_step(prev, state)
            prev = logits.argmax(dim=-1)
            for b, token in enumerate(prev.tolist()):
                tokens[b].append(token)
    return tokens
'''},
        "fails": ["test_greedy_public", "test_greedy"],
        "hint": "your translations equal greedy decoding that keeps going after <eos>: stop a sentence at its first <eos>",
        "lesson": "1b",
        "section": 2,
        "public": True,
    },
    "greedy_feeds_bos_every_step": {
        "replace": {"greedy_decode": _GREEDY_HEAD + '''
        for _ in range(max_len):
            logits, state = model.decode_step(prev, state)  # prev is never updated
            for b, token in enumerate(logits.argmax(dim=-1).tolist()):
                if done[b]:
                    continue
                if token == eos_id:
                    done[b] = True
                else:
                    tokens[b].append(token)
            if all(done):
                break
    return tokens
'''},
        "fails": ["test_greedy"],
    },
    "bleu_without_brevity_penalty": {
        "replace": {"bleu": _BLEU_HEAD + '''
    score = 1.0
    for n in range(1, min(k, len_pred) + 1):
        label_ngrams = collections.Counter(tuple(label_tokens[i:i + n]) for i in range(len_label - n + 1))
        pred_ngrams = collections.Counter(tuple(pred_tokens[i:i + n]) for i in range(len_pred - n + 1))
        matches = sum(min(count, label_ngrams[gram]) for gram, count in pred_ngrams.items())
        score *= (matches / (len_pred - n + 1)) ** (0.5 ** n)
    return score
'''},
        "fails": ["test_bleu_public", "test_bleu"],
        "hint": "your BLEU equals one without the brevity penalty: multiply by exp(min(0, 1 - len_label / len_pred))",
        "lesson": "1b",
        "section": 3,
        "public": True,
    },
    "bleu_equal_ngram_weights": {
        "replace": {"bleu": _BLEU_HEAD + '''
    score = math.exp(min(0.0, 1.0 - len_label / len_pred))
    for n in range(1, min(k, len_pred) + 1):
        label_ngrams = collections.Counter(tuple(label_tokens[i:i + n]) for i in range(len_label - n + 1))
        pred_ngrams = collections.Counter(tuple(pred_tokens[i:i + n]) for i in range(len_pred - n + 1))
        matches = sum(min(count, label_ngrams[gram]) for gram, count in pred_ngrams.items())
        score *= (matches / (len_pred - n + 1)) ** (1 / k)  # standard BLEU's weights, not 1/2^n
    return score
'''},
        "fails": ["test_bleu_public", "test_bleu"],
        "public": True,
    },
    "bleu_unclipped_counts": {
        "replace": {"bleu": _BLEU_HEAD + '''
    score = math.exp(min(0.0, 1.0 - len_label / len_pred))
    for n in range(1, min(k, len_pred) + 1):
        label_ngrams = set(tuple(label_tokens[i:i + n]) for i in range(len_label - n + 1))
        matches = sum(tuple(pred_tokens[i:i + n]) in label_ngrams for i in range(len_pred - n + 1))
        score *= (matches / (len_pred - n + 1)) ** (0.5 ** n)
    return score
'''},
        "fails": ["test_bleu"],
    },
    "loss_counts_padding": {
        "replace": {"masked_loss": '''
def masked_cross_entropy(logits, targets, valid_lens):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
'''},
        "fails": ["test_loss_public", "test_loss"],
        "hint": "your loss equals a cross-entropy that also counts the padded positions: give them weight 0 and average over the real tokens",
        "lesson": "1a",
        "section": 6,
        "public": True,
    },
    # D2L's MaskedSoftmaxCELoss: each row averaged over all L positions (pads as zeros), then over rows.
    "loss_divides_by_padded_length": {
        "replace": {"masked_loss": '''
def masked_cross_entropy(logits, targets, valid_lens):
    real = torch.arange(targets.shape[1])[None, :] < valid_lens[:, None]
    token_loss = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    return (token_loss * real).mean(dim=1).mean()
'''},
        "fails": ["test_loss"],
    },
    # Scheduled sampling: the coin read the wrong way round (True = the model's own guess).
    "sampling_coin_inverted": {
        "replace": {"scheduled_sampling": _sampling("torch.where(use_reference[:, t], guess, tgt_in[:, t])")},
        "fails": ["test_scheduled_sampling"],
        "hint": "your logits equal scheduled sampling with the coins read the wrong way round: where use_reference is True, "
                "the step reads the reference token",
        "lesson": "1a",
        "section": 6,
        "public": True,
    },
    # The coin of the previous step decides what step t reads.
    "sampling_coin_shifted": {
        "replace": {"scheduled_sampling": _sampling("torch.where(use_reference[:, t - 1], tgt_in[:, t], guess)")},
        "fails": ["test_scheduled_sampling"],
        "hint": "your logits equal scheduled sampling that reads the coin of step t - 1 to choose step t's input: "
                "use_reference[:, t] decides what step t reads",
        "lesson": "1a",
        "section": 6,
        "public": True,
    },
    # The model's guess fed one step late: the argmax of the logits two steps back.
    "sampling_guess_one_step_late": {
        "replace": {"scheduled_sampling": _sampling("torch.where(use_reference[:, t], tgt_in[:, t], "
                                                    "steps[-2].argmax(dim=-1) if t > 1 else tgt_in[:, 0])")},
        "fails": ["test_scheduled_sampling"],
        "public": True,
    },
    # The coins ignored: plain teacher forcing.
    "sampling_ignores_coins": {
        "replace": {"scheduled_sampling": _sampling("tgt_in[:, t]")},
        "fails": ["test_scheduled_sampling"],
        "public": True,
    },
    # The experiment: the absolute distance instead of the drift relative to the packed state's norm.
    "experiment_absolute_drift": {
        "replace": {"answers_experiment": '''
drifts = []
with torch.no_grad():
    _, packed_state = exp_encoder(exp_sentence, torch.tensor([exp_len]))
    for pads in (1, exp_pads, 100):
        tokens = torch.cat([exp_sentence, torch.zeros(1, pads, dtype=torch.long)], dim=1)
        _, state = exp_encoder.rnn(exp_encoder.embedding(tokens))
        drifts.append(float((state - packed_state).norm()))
ANSWER_DRIFT_1, ANSWER_DRIFT_PADS, ANSWER_DRIFT_100 = drifts
'''},
        "fails": ["test_experiment_drift"],
    },
    "wrong_answers": {
        "replace": {"answers": '''
ANSWER_STATE_SHAPE = (VARIANT["q_B"], VARIANT["q_S"], VARIANT["q_h"])  # the shape of the outputs, batch-first
ANSWER_TEACHER_FORCING = "b"
ANSWER_RNN_PATTERN = "d"
ANSWER_BREVITY = math.exp(1 - VARIANT["len_pred"] / VARIANT["len_label"])
'''},
        "fails": ["test_answer_state_shape", "test_answer_teacher_forcing", "test_answer_rnn_pattern",
                  "test_answer_brevity"],
    },
}

# Issue 29: every trivial function (zeros, identity, sign flip, a constant, an empty module, None) in
# place of each graded function and class: no test may give one a point.
MISTAKES.update(trivial_mistakes(Path(__file__).parent / "seq2seq.ipynb"))
