"""PyTorch peer of `megatrain generate` for bench/bench_generate.sh: the
GPT-2 block (learned positions, LayerNorm, GELU-tanh, biases, tied output)
with the weights of a layout-free checkpoint (tests/reference/dist_ckpt.py),
fp32, greedy decoding with a KV cache written by hand (per layer K, V
[heads, len, hn] grown by one row per step). Prints the ids and a line in
megatrain's format:
  generate: N prompt tokens, prefill T s (X tokens/s); M new tokens, decode T s (Y tokens/s); ...
usage: generate_torch.py CKPT --ids "ID ..." [--max-new-tokens N]
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from dist_ckpt import load_checkpoint  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--ids", required=True)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--print-ids", action="store_true")  # always printed (megatrain's flag)
    a = ap.parse_args()
    meta, T = load_checkpoint(a.ckpt)
    m = meta["config"]["model"]
    h, nh, L, V = m["hidden_size"], m["num_attention_heads"], m["num_layers"], m["vocab_size"]
    hn, eps = h // nh, m.get("norm_epsilon", 1e-5)
    P = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)) for k, v in T.items()
         if not k.startswith("optimizer.")}
    P = {k: (v.reshape(-1) if v.shape[0] == 1 else v) for k, v in P.items()}
    wte, wpe = P["embedding.word_embeddings.weight"], P["embedding.position_embeddings.weight"]
    cache = [[None, None] for _ in range(L)]

    def step(ids, pos0):
        n = len(ids)
        x = wte[torch.tensor(ids)] + wpe[pos0:pos0 + n]
        for l in range(L):
            p = "decoder.layers.%d." % l
            y = F.layer_norm(x, (h,), P[p + "input_layernorm.weight"], P[p + "input_layernorm.bias"], eps)
            qkv = (y @ P[p + "self_attention.linear_qkv.weight"].T + P[p + "self_attention.linear_qkv.bias"])
            qkv = qkv.view(n, nh, 3, hn)
            q, k, v = (qkv[:, :, i, :].transpose(0, 1) for i in range(3))  # [nh, n, hn]
            if cache[l][0] is not None:
                k = torch.cat((cache[l][0], k), 1)
                v = torch.cat((cache[l][1], v), 1)
            cache[l] = [k, v]
            s = (q @ k.transpose(1, 2)) / math.sqrt(hn)  # [nh, n, pos0 + n]
            mask = torch.arange(pos0 + n)[None, :] > (pos0 + torch.arange(n))[:, None]
            ctx = torch.softmax(s.masked_fill(mask, float("-inf")), -1) @ v
            ctx = ctx.transpose(0, 1).reshape(n, h)
            x = x + ctx @ P[p + "self_attention.linear_proj.weight"].T + P[p + "self_attention.linear_proj.bias"]
            y = F.layer_norm(x, (h,), P[p + "pre_mlp_layernorm.weight"], P[p + "pre_mlp_layernorm.bias"], eps)
            y = F.gelu(y @ P[p + "mlp.linear_fc1.weight"].T + P[p + "mlp.linear_fc1.bias"], approximate="tanh")
            x = x + y @ P[p + "mlp.linear_fc2.weight"].T + P[p + "mlp.linear_fc2.bias"]
        y = F.layer_norm(x[-1], (h,), P["decoder.final_layernorm.weight"], P["decoder.final_layernorm.bias"], eps)
        return y @ wte[:V].T

    ids = [int(t) for t in a.ids.split()]
    n_prompt = len(ids)
    with torch.no_grad():
        t0 = time.perf_counter()
        logits = step(ids, 0)
        t1 = time.perf_counter()
        new = 0
        while True:
            nxt = int(torch.argmax(logits))
            ids.append(nxt)
            new += 1
            if new == a.max_new_tokens or nxt == 50256:
                break
            logits = step([nxt], len(ids) - 1)
        t2 = time.perf_counter()
    print("ids: " + " ".join(map(str, ids)))
    print("generate: %d prompt tokens, prefill %.3f s (%.1f tokens/s); %d new tokens, decode %.3f s "
          "(%.1f tokens/s); kv cache on, torch %d threads" % (
              n_prompt, t1 - t0, n_prompt / (t1 - t0), new, t2 - t1,
              (new - 1) / (t2 - t1) if new > 1 else 0.0, torch.get_num_threads()))


if __name__ == "__main__":
    main()
