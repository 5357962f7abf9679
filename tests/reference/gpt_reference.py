"""PyTorch reference of megatrain's GPT (tests only; Debian python3-torch).

Same math as model/gpt*.c: token + position embeddings, pre-LayerNorm blocks
with fused QKV whose output features are ordered [heads, 3, head_dim]
(Megatron), causal softmax attention, GELU (tanh), final LayerNorm, output
layer tied to the word embedding (or untied), cross-entropy over the real
vocabulary only (padded logit columns excluded). No dropout.
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F


def load_tensor(d, name, shape, dtype=np.float32):
    a = np.fromfile(os.path.join(d, name + ".bin"), dtype=dtype)
    return a.reshape(shape)


class Reference:
    def __init__(self, dump_dir, dtype=torch.float64):
        with open(os.path.join(dump_dir, "meta.json")) as f:
            self.meta = json.load(f)
        self.dir = dump_dir
        self.cfg = self.meta["config"]
        self.dtype = dtype
        self.params = {}
        self.no_wd = {}
        for p in self.meta["params"]:
            rows, cols = p["shape"]
            shape = (cols,) if rows == 1 else (rows, cols)
            a = load_tensor(dump_dir, "init." + p["name"], shape)
            self.params[p["name"]] = torch.tensor(a, dtype=dtype, requires_grad=True)
            self.no_wd[p["name"]] = p["no_weight_decay"]

    def tokens(self):
        c = self.cfg
        t = np.fromfile(os.path.join(self.dir, "tokens.bin"), dtype=np.int32)
        return torch.tensor(t.reshape(-1, c["micro_batch_size"], c["seq_length"] + 1).astype(np.int64))

    def loss(self, batch):
        """batch: [b, s+1] int64 -> mean token cross-entropy."""
        c, P = self.cfg, self.params
        h, nh, L = c["hidden_size"], c["num_attention_heads"], c["num_layers"]
        hn, V = h // nh, c["vocab_size"]
        x_ids, y_ids = batch[:, :-1], batch[:, 1:]
        b, s = x_ids.shape
        x = P["embedding.word_embeddings.weight"][x_ids] + P["embedding.position_embeddings.weight"][:s]
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        for l in range(L):
            pre = "decoder.layers.%d." % l
            ln1 = F.layer_norm(x, (h,), P[pre + "input_layernorm.weight"], P[pre + "input_layernorm.bias"], 1e-5)
            qkv = ln1 @ P[pre + "self_attention.linear_qkv.weight"].T + P[pre + "self_attention.linear_qkv.bias"]
            qkv = qkv.view(b, s, nh, 3, hn)
            q, k, v = (qkv[:, :, :, i, :].permute(0, 2, 1, 3) for i in range(3))  # [b, nh, s, hn]
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(hn)
            scores = scores.masked_fill(mask, float("-inf"))
            ctx = torch.softmax(scores, dim=-1) @ v  # [b, nh, s, hn]
            ctx = ctx.permute(0, 2, 1, 3).reshape(b, s, h)
            x = x + ctx @ P[pre + "self_attention.linear_proj.weight"].T + P[pre + "self_attention.linear_proj.bias"]
            ln2 = F.layer_norm(x, (h,), P[pre + "pre_mlp_layernorm.weight"], P[pre + "pre_mlp_layernorm.bias"], 1e-5)
            f1 = ln2 @ P[pre + "mlp.linear_fc1.weight"].T + P[pre + "mlp.linear_fc1.bias"]
            g = F.gelu(f1, approximate="tanh")
            x = x + g @ P[pre + "mlp.linear_fc2.weight"].T + P[pre + "mlp.linear_fc2.bias"]
        lnf = F.layer_norm(x, (h,), P["decoder.final_layernorm.weight"], P["decoder.final_layernorm.bias"], 1e-5)
        w_out = P.get("output_layer.weight", P["embedding.word_embeddings.weight"])
        logits = lnf @ w_out.T
        logits = logits[..., :V]  # padded vocabulary never enters the softmax
        return F.cross_entropy(logits.reshape(-1, V), y_ids.reshape(-1))

    def adamw(self, lrs):
        o = self.meta["adamw"]
        groups = [
            {"params": [p for n, p in self.params.items() if not self.no_wd[n]], "weight_decay": o["weight_decay"]},
            {"params": [p for n, p in self.params.items() if self.no_wd[n]], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=lrs[0], betas=(o["beta1"], o["beta2"]), eps=o["eps"])
