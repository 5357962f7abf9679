"""Greedy decoding by an independent PyTorch model, for `megatrain generate`
(tests/integration/test_generate.sh).

The model is tests/reference/llama_reference.py (GPT-2 and Llama-style
blocks, MoE layers routed dropless with the checkpoint's expert biases, written from the papers and Hugging Face / Megatron-core semantics),
its parameters read from a layout-free checkpoint with
tests/reference/dist_ckpt.py (global tensors, vocabulary rows = vocab_size),
in float64. Decoding recomputes the whole sequence every step (no cache):
the next token is the argmax of the last position's logits over the real
vocabulary (lowest id on ties), stopping after the end-of-text token 50256
or max_new_tokens.

usage: generate_reference.py CKPT --ids "ID ID ..." --max-new-tokens N
           [--logits FILE]   megatrain's --dump-logits file: also report the
                             worst |logit difference| per step (fp32 [n, V])
Prints "ids: ..." (prompt and continuation) and, with --logits, the worst
difference and the largest |logit| on a line "max_abs_logit_diff X max_abs_logit Y".
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_ckpt import load_checkpoint  # noqa: E402
from llama_reference import Config, attention, expected_params, mlp, moe, normalize  # noqa: E402

EOD = 50256


def model_from_checkpoint(path):
    meta, tensors = load_checkpoint(path)
    cfg = meta["config"]
    m = dict(cfg["model"])
    if not m.get("group_query_attention", False):
        m["num_query_groups"] = None  # megatrain reads num_query_groups only with GQA
    m["padded_vocab_size"] = m["vocab_size"]  # the checkpoint keeps the real rows only
    m["micro_batch_size"] = 1
    if int(m.get("num_experts", 0) or 0) > 0:
        # generation routes every token on its own, dropless (model/gpt_infer.c)
        m["moe_expert_capacity_factor"] = None
        nl, freq = m["num_layers"], m.get("moe_layer_freq", 1)
        moe_layers = [l for l in range(nl) if (freq[l] if isinstance(freq, list) else l % freq == 0)]
        bias = ["decoder.layers.%d.mlp.router.expert_bias" % l for l in moe_layers]
        if all(b in tensors for b in bias):
            m["moe_expert_bias"] = [np.asarray(tensors[b], dtype=np.float64).ravel().tolist()
                                    for b in bias]
    c = Config(m)
    P = {}
    for name, (shape, _) in expected_params(c).items():
        if name not in tensors:
            sys.exit("generate_reference: checkpoint %s has no tensor %s" % (path, name))
        a = np.asarray(tensors[name], dtype=np.float64)
        if a.size != int(np.prod(shape)):
            sys.exit("generate_reference: %s has %d elements, expected %s" % (name, a.size, shape))
        P[name] = torch.tensor(a.reshape(shape), dtype=torch.float64)
    return c, P


def next_logits(c, P, ids):
    """Logits [V] after the sequence ids (list of int), whole-sequence forward."""
    x_ids = torch.tensor([ids], dtype=torch.int64)
    s = x_ids.shape[1]
    x = P["embedding.word_embeddings.weight"][x_ids]
    if c.pos == "learned_absolute":
        x = x + P["embedding.position_embeddings.weight"][:s]
    for l in range(c.L):
        pre = "decoder.layers.%d." % l
        x = x + attention(c, normalize(c, x, P, pre + "input_layernorm"), P, pre + "self_attention.")
        ln2 = normalize(c, x, P, pre + "pre_mlp_layernorm")
        x = x + (moe(c, ln2, P, pre)[0] if c.is_moe(l) else mlp(c, ln2, P, pre + "mlp.", c.ffn))
    x = normalize(c, x, P, "decoder.final_layernorm")
    w_out = P["output_layer.weight"] if c.untie else P["embedding.word_embeddings.weight"]
    return (x[0, -1] @ w_out.T)[: c.V]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--ids", required=True)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--logits")
    a = ap.parse_args()
    c, P = model_from_checkpoint(a.ckpt)
    ids = [int(t) for t in a.ids.split()]
    theirs = None
    if a.logits:
        theirs = np.fromfile(a.logits, dtype=np.float32).reshape(-1, c.V)
    worst, scale = 0.0, 0.0
    with torch.no_grad():
        for step in range(a.max_new_tokens):
            lg = next_logits(c, P, ids)
            if theirs is not None and step < theirs.shape[0]:
                worst = max(worst, float(np.max(np.abs(lg.numpy() - theirs[step]))))
                scale = max(scale, float(np.max(np.abs(lg.numpy()))))
            nxt = int(torch.argmax(lg))  # first maximum: lowest id on ties
            ids.append(nxt)
            if nxt == EOD:
                break
    print("ids: " + " ".join(str(t) for t in ids))
    if theirs is not None:
        print("max_abs_logit_diff %.3e max_abs_logit %.3e" % (worst, scale))


if __name__ == "__main__":
    main()
