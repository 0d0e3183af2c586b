"""Translation benchmark: GRU seq2seq, Bahdanau attention and the Transformer.

Each model is trained for the same wall-time budget in its own fresh Python process
(so peak memory figures do not mix), then decodes the held-out test split greedily.
Reported per model: training wall time, peak resident memory (``ru_maxrss`` of the
worker process), and test BLEU three ways: sacreBLEU on the detokenised, readable output
against the raw references (13a tokenisation, lower-cased: the figure comparable with
published ones); corpus BLEU with sacrebleu's formula on the course's own word tokens
(:func:`course_lib.metrics.corpus_bleu`; higher, since ``l' homme`` counts as two tokens);
and D2L's sentence formula with k=2 averaged over the test pairs (0-1,
:func:`course_lib.metrics.sentence_bleu_d2l_mean`). Also BLEU per source-length bucket,
buckets chosen from the test data (the fixed-context bottleneck of the plain GRU model
shows there). For the real Tatoeba file and D2L's models, see ``bench_real_translation.py``.

Data:
* default: the generated English -> French corpus (:mod:`course_lib.corpus`); no
  English sentence is shared between the training and test splits;
* ``--fra-eng PATH`` (or ``$COURSE_FRA_ENG``): the first ``--fra-eng-lines`` lines of a
  Tatoeba ``fra.txt``; the test split holds ``--n-test`` pairs whose source sentences never occur
  in training (:func:`course_lib.fra_eng.split_pairs`);
* ``--write-fake-fra-eng PATH`` writes a small file in Tatoeba's format (generated
  sentences, sorted by length like fra.txt, with an attribution column) for a smoke run.

Usage::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_translation.py
    .venv/bin/python benchmarks/bench_translation.py --seconds 10 --models seq2seq,bahdanau
    .venv/bin/python benchmarks/bench_translation.py --write-fake-fra-eng /tmp/fra.txt
    .venv/bin/python benchmarks/bench_translation.py --fra-eng /tmp/fra.txt --seconds 5
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parents[1]

MODELS = ("seq2seq", "bahdanau", "transformer")
LABELS = {"seq2seq": "GRU seq2seq", "bahdanau": "GRU + Bahdanau attention", "transformer": "Transformer"}
# Source-length buckets (tokens, <eos> not counted) are chosen from the test data: the
# quintiles of the source lengths (fra.txt's first lines are all short, so fixed buckets
# would leave most of them empty).


def length_buckets(lengths: list[int], parts: int = 5) -> list[tuple[int, int]]:
    """Inclusive (lo, hi) token-length ranges that split ``lengths`` into ~equal groups."""
    ordered = sorted(lengths)
    cuts = sorted({ordered[(i * (len(ordered) - 1)) // parts] for i in range(1, parts)})
    edges = [ordered[0]] + [c + 1 for c in cuts if ordered[0] <= c < ordered[-1]] + [ordered[-1] + 1]
    return [(lo, hi - 1) for lo, hi in zip(edges, edges[1:])]


# --------------------------------------------------------------------------- data


def load_splits(args: argparse.Namespace) -> tuple[list[tuple[str, str]], list[tuple[str, str]], str]:
    """Training pairs, test pairs and a one-line description of the data."""
    if args.fra_eng:
        from course_lib.fra_eng import read_fra_eng, split_pairs

        pairs = read_fra_eng(args.fra_eng, max_pairs=args.fra_eng_lines)
        splits = split_pairs(pairs, n_valid=0, n_test=args.n_test, seed=args.seed)
        n_src = len({en for en, _ in splits.test})
        desc = (f"fra-eng file {args.fra_eng}: first {len(pairs)} lines, {len(splits.train)} training "
                f"pairs, {len(splits.test)} test pairs ({n_src} distinct source sentences, none in training)")
        return splits.train, splits.test, desc
    from course_lib.corpus import make_splits

    splits = make_splits(args.n_train, 0, args.n_test, seed=args.seed)
    desc = (f"generated corpus (course_lib.corpus, seed {args.seed}): {len(splits.train)} training pairs, "
            f"{len(splits.test)} test pairs, no English sentence shared")
    return splits.train, splits.test, desc


def write_fake_fra_eng(path: str, n: int, seed: int) -> None:
    """A file in fra.txt's format: English<TAB>French<TAB>attribution, shortest first."""
    from course_lib.corpus import generate_pairs

    pairs = sorted(set(generate_pairs(n, seed=seed + 1)), key=lambda p: (len(p[0]), p[0]))
    lines = [f"{en}\t{fr}\tCC-BY 2.0 (France) Attribution: tatoeba.org #{i} (fake) & #{i + 1} (fake)\n"
             for i, (en, fr) in enumerate(pairs)]
    Path(path).write_text("".join(lines), encoding="utf-8")
    print(f"wrote {len(lines)} fake fra-eng lines to {path}")


# --------------------------------------------------------------------------- models


def build_model(name: str, src_vocab_size: int, tgt_vocab_size: int, args: argparse.Namespace):
    """The model and the learning rate it trains with."""
    if name in ("seq2seq", "bahdanau"):
        from course_lib.seq2seq import AttentionSeq2Seq, Seq2Seq, Seq2SeqConfig

        cfg = Seq2SeqConfig(src_vocab_size, tgt_vocab_size, embed_size=args.rnn_embed,
                            num_hiddens=args.rnn_hiddens, num_layers=2, dropout=args.dropout)
        return (Seq2Seq if name == "seq2seq" else AttentionSeq2Seq)(cfg), cfg, args.rnn_lr
    if name == "transformer":
        from course_lib.transformer import Transformer, TransformerConfig

        cfg = TransformerConfig(src_vocab_size, tgt_vocab_size, d_model=args.tf_d_model,
                                num_heads=4, d_ff=args.tf_d_ff or 4 * args.tf_d_model, num_layers=2,
                                dropout=args.dropout, max_len=args.max_len + 2)
        return Transformer(cfg), cfg, args.tf_lr
    raise ValueError(f"unknown model {name!r}; choose from {MODELS}")


# --------------------------------------------------------------------------- one model


def bucket_name(lo: int, hi: int) -> str:
    return f"{lo}-{hi}" if hi > lo else f"{lo}"


def score(hyps: list[list[str]], refs: list[list[list[str]]]) -> dict[str, float]:
    """Corpus BLEU (0-100, all references of a source) and D2L's k=2 mean (0-1, first reference)."""
    from course_lib.metrics import corpus_bleu, sentence_bleu_d2l_mean

    return {
        "corpus_bleu": corpus_bleu(hyps, refs),
        "d2l_bleu_k2": sentence_bleu_d2l_mean(hyps, [r[0] for r in refs], k=2),
    }


def sacre_bleu(hyps: list[str], refs: list[list[str]]) -> float | None:
    """Standard sacreBLEU (13a, lower-cased) of readable text against raw references, or
    None without the sacrebleu package (a dev dependency)."""
    try:
        import sacrebleu
    except ImportError:
        return None
    width = max(len(r) for r in refs)
    streams = [[r[i] if i < len(r) else None for r in refs] for i in range(width)]
    return sacrebleu.BLEU(lowercase=True).corpus_score(hyps, streams).score


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def train_model(model, loader, lr: float, args: argparse.Namespace) -> dict:
    """Adam + gradient clipping until a budget runs out: wall seconds, CPU seconds,
    optimizer steps or epochs, whichever comes first (checked after every step).

    The same steps as ``course_lib.training.fit``; written out here because ``fit`` can only
    stop on wall time, and on a shared machine CPU time is the fairer budget.
    """
    import torch

    from course_lib.training import seq2seq_loss

    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    wall0, cpu0 = time.perf_counter(), cpu_seconds()
    steps, epochs, losses = 0, 0, []
    done = False
    model.train()
    while not done and epochs < args.max_epochs:
        for batch in loader:
            loss = seq2seq_loss(model, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            steps += 1
            losses.append(float(loss))
            done = ((args.seconds is not None and time.perf_counter() - wall0 >= args.seconds)
                    or (args.cpu_seconds is not None and cpu_seconds() - cpu0 >= args.cpu_seconds)
                    or (args.max_steps is not None and steps >= args.max_steps))
            if done:
                break
        epochs += 1
    model.eval()
    tail = losses[-len(loader):]
    return {"train_seconds": time.perf_counter() - wall0, "train_cpu_seconds": cpu_seconds() - cpu0,
            "epochs": epochs, "steps": steps, "final_train_loss": sum(tail) / len(tail)}


def run_worker(name: str, args: argparse.Namespace) -> dict:
    import torch

    from course_lib.data import build_vocabs, detokenize, make_translation_loader, tokenize
    from course_lib.decoding import greedy_decode
    from course_lib.training import set_seed

    torch.set_num_threads(args.threads)
    set_seed(args.seed)
    train, test, desc = load_splits(args)
    if args.train_limit:
        train = train[: args.train_limit]
        desc += f"; first {len(train)} training pairs used"
    if args.recipe == "d2l":
        desc += "; D2L recipe"
    src_vocab, tgt_vocab = build_vocabs(train, min_freq=args.min_freq)
    loader = make_translation_loader(train, src_vocab, tgt_vocab, args.batch_size, max_len=args.max_len,
                                     fixed_length=args.fixed_length, seed=args.seed)
    model, cfg, lr = build_model(name, len(src_vocab), len(tgt_vocab), args)
    n_params = sum(p.numel() for p in model.parameters())
    history = train_model(model, loader, lr, args)

    # Test: one hypothesis per *distinct* source, scored against all its references.
    refs_by_src: dict[str, list[list[str]]] = {}
    raw_refs_by_src: dict[str, list[str]] = {}
    for en, fr in test:
        refs_by_src.setdefault(en, []).append(tokenize(fr))
        raw_refs_by_src.setdefault(en, []).append(fr)
    sources = list(refs_by_src)
    start = time.perf_counter()
    hyps: list[list[str]] = []
    for i in range(0, len(sources), 256):
        chunk = sources[i : i + 256]
        ids = [src_vocab.encode(tokenize(s))[: args.max_len - 1] + [src_vocab.eos] for s in chunk]
        width = max(len(x) for x in ids)
        src = torch.tensor([x + [src_vocab.pad] * (width - len(x)) for x in ids])
        lens = torch.tensor([len(x) for x in ids])
        out = greedy_decode(model, src, lens, bos_id=tgt_vocab.bos, eos_id=tgt_vocab.eos,
                            max_len=args.max_len)
        hyps.extend(tgt_vocab.decode(t) for t in out)
    decode_seconds = time.perf_counter() - start
    refs = [refs_by_src[s] for s in sources]
    # D2L's formula is averaged over test *pairs*, as in the D2L anchor.
    hyp_of = dict(zip(sources, hyps))
    pair_hyps = [hyp_of[en] for en, _ in test]
    pair_refs = [[tokenize(fr)] for _, fr in test]
    result = score(hyps, refs)
    result["d2l_bleu_k2"] = score(pair_hyps, pair_refs)["d2l_bleu_k2"]
    result["sacrebleu"] = sacre_bleu([detokenize(h) for h in hyps],
                                     [raw_refs_by_src[s] for s in sources])
    buckets: dict[str, dict[str, float]] = {}
    for lo, hi in length_buckets([len(tokenize(s)) for s in sources]):
        key = bucket_name(lo, hi)
        idx = [i for i, s in enumerate(sources) if lo <= len(tokenize(s)) <= hi]
        if idx:
            buckets[key] = {"n": len(idx), **score([hyps[i] for i in idx], [refs[i] for i in idx])}
    examples = [{"src": s, "ref": " ".join(refs_by_src[s][0]), "hyp": " ".join(hyp_of[s])}
                for s in sorted(sources, key=lambda s: len(tokenize(s)))[-3:]]

    return {
        "model": name,
        "data": desc,
        "config": asdict(cfg),
        "lr": lr,
        "batch_size": args.batch_size,
        "params": n_params,
        "threads": torch.get_num_threads(),
        **history,
        "decode_seconds": decode_seconds,
        "test_sources": len(sources),
        "test_pairs": len(test),
        **result,
        "buckets": buckets,
        "examples": examples,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


# --------------------------------------------------------------------------- driver


def worker_command(name: str, argv: list[str]) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *argv, "--worker", name]


def markdown_table(results: list[dict]) -> str:
    lines = [
        "| model | params | epochs (steps) | train wall s (CPU s) | peak RSS MB | sacreBLEU (detokenised) | corpus BLEU on own tokens (0-100) | D2L BLEU k=2 (0-1) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(f"| {LABELS[r['model']]} | {r['params']:,} | {r['epochs']} ({r['steps']}) | "
                     f"{r['train_seconds']:.1f} ({r['train_cpu_seconds']:.0f}) | {r['peak_rss_mb']:.0f} | "
                     f"{'-' if r.get('sacrebleu') is None else format(r['sacrebleu'], '.1f')} | {r['corpus_bleu']:.1f} | "
                     f"{r['d2l_bleu_k2']:.3f} |")
    keys = list(results[0]["buckets"])  # the same test data, so the same buckets, for every model
    lines += ["", "Corpus BLEU on own tokens (0-100) by source length in tokens (number of test sentences):", "",
              "| model | " + " | ".join(f"{k} (n={results[0]['buckets'].get(k, {}).get('n', 0)})" for k in keys) + " |",
              "|---|" + "---:|" * len(keys)]
    for r in results:
        cells = [f"{r['buckets'][k]['corpus_bleu']:.1f}" if k in r["buckets"] else "-" for k in keys]
        lines.append(f"| {LABELS[r['model']]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ",".join(MODELS))
    p.add_argument("--seconds", type=float, default=60.0,
                   help="training wall-time budget per model (0: none)")
    p.add_argument("--cpu-seconds", type=float, default=None,
                   help="training CPU-time budget per model (fairer than wall time on a shared machine)")
    p.add_argument("--max-epochs", type=int, default=1000, help="stop earlier if this many epochs are done")
    p.add_argument("--max-steps", type=int, default=None, help="stop earlier after this many optimizer steps")
    p.add_argument("--threads", type=int, default=2, help="torch threads per worker")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-train", type=int, default=8000, help="generated corpus: training pairs")
    p.add_argument("--n-test", type=int, default=1000,
                   help="test pairs (with --fra-eng, split_pairs: no test source in training)")
    p.add_argument("--fra-eng", default=os.environ.get("COURSE_FRA_ENG"),
                   help="Tatoeba fra.txt to use instead of the generated corpus (default $COURSE_FRA_ENG)")
    p.add_argument("--fra-eng-lines", type=int, default=10000, help="read the first N lines of --fra-eng")
    p.add_argument("--write-fake-fra-eng", metavar="PATH", help="write a small fake fra.txt and exit")
    p.add_argument("--fake-lines", type=int, default=3000, help="lines of the fake fra.txt")
    p.add_argument("--min-freq", type=int, default=1, help="vocabulary min_freq (D2L uses 2 on fra-eng)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-len", type=int, default=40, help="cap on source / target tokens")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--rnn-embed", type=int, default=64)
    p.add_argument("--rnn-hiddens", type=int, default=128)
    p.add_argument("--rnn-lr", type=float, default=1e-2)
    p.add_argument("--tf-d-model", type=int, default=64)
    p.add_argument("--tf-d-ff", type=int, default=0, help="FFN size (0: 4 * d_model)")
    p.add_argument("--tf-lr", type=float, default=1e-3)
    p.add_argument("--train-limit", type=int, default=0, help="use only the first N training pairs (0: all)")
    p.add_argument("--recipe", choices=("ours", "d2l"), default="ours",
                   help="d2l: D2L's book settings instead (512 training pairs, 9-token fixed-length "
                        "sequences, 30 epochs, batch 128, min_freq 2, its model sizes and learning rates)")
    p.add_argument("--json", metavar="PATH", help="also write all results as JSON")
    p.add_argument("--worker", choices=MODELS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.seconds:
        args.seconds = None
    if args.recipe == "d2l":
        # D2L 1.0.3, chapters 10.7 / 11.4 / 11.7: MTFraEng(batch_size=128, num_steps=9, num_train=512),
        # Vocab(min_freq=2), 30 epochs; GRU: embed 256, hidden 256, 2 layers, dropout 0.2,
        # lr 0.005; Transformer: d 256, FFN 64, 4 heads, 2 blocks, dropout 0.2, lr 0.0015.
        args.n_train, args.train_limit, args.max_len, args.fixed_length = 512, 512, 9, True
        args.max_epochs, args.seconds, args.batch_size, args.min_freq = 30, None, 128, 2
        args.rnn_embed, args.rnn_hiddens, args.dropout, args.rnn_lr = 256, 256, 0.2, 0.005
        args.tf_d_model, args.tf_d_ff, args.tf_lr = 256, 64, 0.0015
    else:
        args.fixed_length = False
    return args


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.write_fake_fra_eng:
        write_fake_fra_eng(args.write_fake_fra_eng, args.fake_lines, args.seed)
        return
    if args.worker:
        print("RESULT " + json.dumps(run_worker(args.worker, args)), flush=True)
        return

    names = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in names:
        if m not in MODELS:
            raise SystemExit(f"unknown model {m!r}; choose from {', '.join(MODELS)}")
    print(f"date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; python {platform.python_version()}; "
          f"{os.cpu_count()} CPUs; torch threads per worker: {args.threads}; "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}")
    print(f"command: {' '.join([Path(sys.executable).name, 'benchmarks/bench_translation.py', *argv])}")
    results = []
    for name in names:
        start = time.perf_counter()
        proc = subprocess.run(worker_command(name, argv), capture_output=True, text=True,
                              env={**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")})
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            sys.stderr.write(proc.stderr)
            raise SystemExit(f"worker {name} failed with exit code {proc.returncode}")
        r = json.loads(lines[-1][len("RESULT "):])
        r["process_seconds"] = time.perf_counter() - start
        results.append(r)
        print(f"{LABELS[name]:26s} train {r['train_seconds']:5.1f} s wall, {r['train_cpu_seconds']:5.1f} s CPU ({r['epochs']} epochs, {r['steps']} steps), "
              f"decode {r['decode_seconds']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB, threads {r['threads']}, "
              f"corpus BLEU {r['corpus_bleu']:.1f}, D2L BLEU(k=2) {r['d2l_bleu_k2']:.3f}", flush=True)
        for ex in r["examples"][-1:]:
            print(f"    src: {ex['src']}\n    ref: {ex['ref']}\n    hyp: {ex['hyp']}")
    print(f"\ndata: {results[0]['data']}\n")
    print(markdown_table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
