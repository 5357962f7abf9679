"""PyTorch side of bench/bench_llama.sh: the model of
tests/reference/llama_reference.py in fp32 on the CPU, timed exactly as
bench/bench_llama.c times megatrain (one warm-up step, then `steps`
iterations of forward + backward + gradient clipping at 1.0 + AdamW, wall
clock, mean and best step, torch.set_num_threads(threads)).

usage: bench_llama_torch.py [layers hidden heads seq micro_batch threads steps ffn vocab]
                            [KEY=VALUE ...]
Defaults and keys as bench_llama.c (Llama-style options on; KEY=VALUE uses
the config-key names, e.g. num_query_groups=12 swiglu=0). sdpa=0 forces the
plain attention (matmul, masked softmax, matmul: the [b, heads, s, s] scores
materialised) where torch >= 2.0 would use scaled_dot_product_attention
(bench/bench_attn.sh).
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import llama_reference as R  # noqa: E402


def num(v):
    try:
        return int(v)
    except ValueError:
        return float(v)


def parse(argv):
    pos = [int(a) for a in argv if "=" not in a]
    a = [12, 768, 12, 256, 4, 2, 3, 2048, 50257]
    a[: len(pos)] = pos[:9]
    d = dict(num_layers=a[0], hidden_size=a[1], num_attention_heads=a[2], seq_length=a[3],
             micro_batch_size=a[4], ffn_hidden_size=a[7], vocab_size=a[8],
             padded_vocab_size=(a[8] + 127) // 128 * 128, max_position_embeddings=a[3],
             position_embedding_type="rope", normalization="RMSNorm", swiglu=True,
             num_query_groups=4, add_bias_linear=False, untie=True)
    sdpa = True
    for kv in (x for x in argv if "=" in x):
        k, v = kv.split("=", 1)
        if k == "sdpa":
            sdpa = v not in ("0", "false", "False")
            continue
        k = "untie" if k == "untie_embeddings_and_output_weights" else k
        d[k] = v if k in ("position_embedding_type", "normalization") else num(v)
    return R.Config(d), a[5], a[6], sdpa


def main():
    c, threads, steps, sdpa = parse(sys.argv[1:])
    torch.set_num_threads(threads)
    P = R.init_params(c, seed=1234, dtype=torch.float32)
    decay = [p for n, p in P.items() if not R.no_weight_decay(n, p.shape)]
    no_decay = [p for n, p in P.items() if R.no_weight_decay(n, p.shape)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8, foreach=True)
    gen = torch.Generator().manual_seed(1)
    batch = torch.randint(0, c.V, (c.b, c.s + 1), generator=gen)
    params = list(P.values())
    print("pytorch %s: %d parameters, %d threads, attention %s" % (
        torch.__version__, sum(p.numel() for n, p in P.items()), torch.get_num_threads(),
        "scaled_dot_product_attention" if sdpa and hasattr(torch.nn.functional, "scaled_dot_product_attention")
        else "matmul + softmax (plain)"))

    def step():
        opt.zero_grad(set_to_none=True)
        ce, obj = R.forward(c, P, batch, sdpa=sdpa)
        obj.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return ce.item()

    step()  # warm-up
    t0, best = time.perf_counter(), 1e30
    for _ in range(steps):
        ts = time.perf_counter()
        loss = step()
        best = min(best, time.perf_counter() - ts)
    dt = (time.perf_counter() - t0) / steps
    print("pytorch: time per step %.1f ms | tokens/s %.1f | best step %.1f ms, tokens/s %.1f | loss %.4f"
          % (1e3 * dt, c.b * c.s / dt, 1e3 * best, c.b * c.s / best, loss))


if __name__ == "__main__":
    main()
