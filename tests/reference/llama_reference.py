"""Independent PyTorch reference of a GPT-2 / Llama-style decoder (tests and
benches only; Debian python3-torch).

Written from the papers and the Hugging Face / Megatron-core semantics, not
from megatrain's C code; it only shares megatrain's parameter NAMES and GLOBAL
LAYOUTS (Megatron-core's), so it can load a dump of tests/tools/gpt_dump:

  embedding.word_embeddings.weight [Vp, h]; embedding.position_embeddings.weight
    [max_pos, h] only with learned_absolute positions
  decoder.layers.N.input_layernorm.{weight,bias}   (no bias with RMSNorm)
  decoder.layers.N.self_attention.linear_qkv.{weight,bias}
      [ng * (np/ng + 2) * hn, h]: rows grouped per query group g: its np/ng
      query heads (hn rows each), then its key head, then its value head
      (Megatron-core's get_query_key_value_tensors view [.., ng, (np/ng+2) hn])
  decoder.layers.N.self_attention.{q,k}_layernorm.{weight,bias} [hn], shared
      by all heads (qk_layernorm; bias only with LayerNorm)
  decoder.layers.N.self_attention.linear_proj.{weight,bias} [h, np*hn]
  decoder.layers.N.pre_mlp_layernorm.{weight,bias}
  decoder.layers.N.mlp.linear_fc1.{weight,bias} [g*ffn, h] (g = 2 with
      swiglu: rows [0, ffn) the gate = HF gate_proj, rows [ffn, 2ffn) the up
      projection = HF up_proj; Megatron's torch.chunk(x, 2, -1))
  decoder.layers.N.mlp.linear_fc2.{weight,bias} [h, ffn]
  MoE layers: decoder.layers.N.mlp.router.weight [E, h],
      decoder.layers.N.mlp.experts.E.linear_fc{1,2}.{weight,bias} (fc1 in the
      same gate/up layout with swiglu)
  decoder.final_layernorm.{weight,bias}; output_layer.weight [Vp, h] when untied
  Linear biases are absent when add_bias_linear is false.

Math (x: [b, s, h], float64 in the tests):
  - norm: LayerNorm (Ba et al. 2016) or RMSNorm (Zhang & Sennrich 2019; HF
    LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * w), eps = norm_epsilon.
  - RoPE (Su et al. 2021, RoFormer; HF apply_rotary_pos_emb; Megatron-core
    RotaryEmbedding): rot_dim = int(hn * rotary_percent); inv_freq_i =
    base^(-2i/rot_dim); angle = pos * inv_freq, pos = 0..s-1; the first
    rot_dim channels of each q and k head become t cos + rotate_half(t) sin,
    the rest pass through. rotate_half: non-interleaved (default; HF) pairs
    channel i with i + rot_dim/2; interleaved (GPT-J) pairs 2i with 2i+1.
    Applied after qk_layernorm (Megatron-core order).
  - attention: causal softmax(q k^T / sqrt(hn)) v; GQA (Ainslie et al. 2023):
    query head n reads key/value head n // (np/ng) (HF repeat_kv).
  - MLP: GELU (tanh approximation, as megatrain's GPT-2 block) or SwiGLU
    (Shazeer 2020): silu(gate) * up.
  - MoE (megatrain's router contract, tests/reference/moe_reference.py): tokens
    in [s, b] order; output = sum_j gate_j * expert_{e_j}(x); the objective
    adds moe_aux_loss_coeff * lb + moe_z_loss_coeff * z per MoE layer.
  - loss: mean cross-entropy over the real vocabulary (padded logit columns
    excluded); output layer = word embedding unless untied. No dropout.
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

from moe_model_router import route
import mla_reference


class Config:
    """Model options with Megatron's defaults; built from a dict such as the
    "config" object of a gpt_dump meta.json (missing keys = GPT-2 block)."""

    def __init__(self, d):
        self.L = int(d["num_layers"])
        self.h = int(d["hidden_size"])
        self.nh = int(d["num_attention_heads"])
        self.ffn = int(d.get("ffn_hidden_size") or 4 * self.h)
        self.s = int(d["seq_length"])
        self.b = int(d.get("micro_batch_size", 1))
        self.V = int(d["vocab_size"])
        self.Vp = int(d.get("padded_vocab_size") or self.V)
        self.max_pos = int(d.get("max_position_embeddings") or self.s)
        self.untie = bool(d.get("untie", d.get("untie_embeddings_and_output_weights", False)))
        self.pos = d.get("position_embedding_type", "learned_absolute")
        assert self.pos in ("learned_absolute", "rope", "none"), self.pos
        self.rotary_base = float(d.get("rotary_base", 10000.0))
        self.rotary_percent = float(d.get("rotary_percent", 1.0))
        self.rotary_interleaved = bool(d.get("rotary_interleaved", False))
        self.use_rope_scaling = bool(d.get("use_rope_scaling", False))
        self.rope_scaling_factor = float(d.get("rope_scaling_factor", 8.0))
        self.norm = d.get("normalization", "LayerNorm")
        # documents inside packed samples (Megatron's GPTDatasetConfig flags)
        self.reset_attention_mask = bool(d.get("reset_attention_mask", False))
        self.reset_position_ids = bool(d.get("reset_position_ids", False))
        self.eod_mask_loss = bool(d.get("eod_mask_loss", False))
        self.eod = int(d.get("eod_token", -1))
        assert self.norm in ("LayerNorm", "RMSNorm"), self.norm
        self.eps = float(d.get("norm_epsilon", d.get("layernorm_epsilon", 1e-5)))
        self.swiglu = bool(d.get("swiglu", False))
        self.ng = int(d.get("num_query_groups") or self.nh)
        self.hn = int(d.get("kv_channels") or self.h // self.nh)
        self.bias = bool(d.get("add_bias_linear", True))
        self.qk_ln = bool(d.get("qk_layernorm", False))
        # Megatron's --apply-wd-to-qk-layernorm (an optimizer option)
        self.wd_qk_ln = bool(d.get("apply_wd_to_qk_layernorm", False))
        self.std = float(d.get("init_method_std", 0.02))
        self.E = int(d.get("num_experts", 0) or 0)
        self.topk = int(d.get("moe_router_topk", 2))
        self.moe_ffn = int(d.get("moe_ffn_hidden_size") or self.ffn)
        freq = d.get("moe_layer_freq", 1)
        # integer k (layers 0, k, 2k, ... are MoE) or one 0/1 entry per layer
        self.moe_pattern = [int(v) for v in freq] if isinstance(freq, list) else None
        self.moe_freq = 1 if isinstance(freq, list) else int(freq or 1)
        self.cf = float(d.get("moe_expert_capacity_factor", 0.0) or 0.0)
        self.policy = d.get("moe_token_drop_policy", "probs")
        self.pre_softmax = bool(d.get("moe_router_pre_softmax", False))
        self.lb_coeff = float(d.get("moe_aux_loss_coeff", 0.0))
        self.z_coeff = float(d.get("moe_z_loss_coeff", 0.0))
        # shared experts (DeepSeekMoE §3.2; Megatron-core SharedExpertMLP): an
        # always-on MLP of this width beside the routed experts
        self.shared = int(d.get("moe_shared_expert_intermediate_size") or 0)
        # DeepSeek-style routing (tests/reference/moe_model_router.py)
        self.score = d.get("moe_router_score_function", "softmax")
        self.scaling = float(d.get("moe_router_topk_scaling_factor") or 0.0)
        self.num_groups = int(d.get("moe_router_num_groups") or 0)
        self.group_topk = int(d.get("moe_router_group_topk") or 0)
        self.lb_type = d.get("moe_router_load_balancing_type", "aux_loss")
        # fixed expert bias per MoE layer (selection only), [n_moe][E]; None = off
        eb = d.get("moe_expert_bias")
        self.expert_bias = [np.array(v, dtype=np.float64) for v in eb] if eb else None
        # multi-token prediction (tests/reference/mtp_reference.py)
        self.mtp = int(d.get("mtp_num_layers") or 0)
        self.mtp_lambda = float(d.get("mtp_loss_scaling_factor", 0.1))
        assert self.nh % self.ng == 0, "num_query_groups must divide num_attention_heads"
        self.rot_dim = int(self.hn * self.rotary_percent)
        mla_reference.parse(self, d)  # multi-latent attention (tests/reference/mla_reference.py)

    def is_moe(self, l):
        if self.E <= 0:
            return False
        if self.moe_pattern is not None:
            return bool(self.moe_pattern[l])
        return l % self.moe_freq == 0

    def is_moe_any(self, l):
        """Layers L .. L+D-1 are the MTP depths' layers, of the last layer's kind."""
        return self.is_moe(self.L - 1) if l >= self.L else self.is_moe(l)

    def moe_index(self, l):
        """Number of MoE layers before layer l (the expert bias is kept per MoE layer)."""
        return sum(self.is_moe_any(j) for j in range(l))


# ---- parameters: names, shapes, Megatron initialisation ----

def expected_params(c):
    """Megatron-core's parameter set for config c: dict name -> (shape, init)
    with init in normal | scaled (std / sqrt(2L)) | ones | zeros."""
    P = {}
    g = 2 if c.swiglu else 1
    P["embedding.word_embeddings.weight"] = ((c.Vp, c.h), "normal")
    if c.pos == "learned_absolute":
        P["embedding.position_embeddings.weight"] = ((c.max_pos, c.h), "normal")

    def norm(name, n):
        P[name + ".weight"] = ((n,), "ones")
        if c.norm == "LayerNorm":
            P[name + ".bias"] = ((n,), "zeros")

    def linear(name, rows, cols, init):
        P[name + ".weight"] = ((rows, cols), init)
        if c.bias:
            P[name + ".bias"] = ((rows,), "zeros")

    for l in range(c.L + c.mtp):
        pre = "decoder.layers.%d." % l if l < c.L else "mtp.layers.%d.mtp_model_layer." % (l - c.L)
        norm(pre + "input_layernorm", c.h)
        if c.mla:
            mla_reference.expected(c, P, pre, norm)
        else:
            linear(pre + "self_attention.linear_qkv", (c.nh + 2 * c.ng) * c.hn, c.h, "normal")
            if c.qk_ln:
                norm(pre + "self_attention.q_layernorm", c.hn)
                norm(pre + "self_attention.k_layernorm", c.hn)
            linear(pre + "self_attention.linear_proj", c.h, c.nh * c.hn, "scaled")
        norm(pre + "pre_mlp_layernorm", c.h)
        if c.is_moe_any(l):
            P[pre + "mlp.router.weight"] = ((c.E, c.h), "normal")
            for e in range(c.E):
                linear(pre + "mlp.experts.%d.linear_fc1" % e, g * c.moe_ffn, c.h, "normal")
                linear(pre + "mlp.experts.%d.linear_fc2" % e, c.h, c.moe_ffn, "scaled")
            if c.shared:
                linear(pre + "mlp.shared_experts.linear_fc1", g * c.shared, c.h, "normal")
                linear(pre + "mlp.shared_experts.linear_fc2", c.h, c.shared, "scaled")
        else:
            linear(pre + "mlp.linear_fc1", g * c.ffn, c.h, "normal")
            linear(pre + "mlp.linear_fc2", c.h, c.ffn, "scaled")
    norm("decoder.final_layernorm", c.h)
    if c.untie:
        P["output_layer.weight"] = ((c.Vp, c.h), "normal")
    for k in range(c.mtp):  # Megatron-core's MultiTokenPredictionLayer
        pre = "mtp.layers.%d." % k
        norm(pre + "enorm", c.h)
        norm(pre + "hnorm", c.h)
        P[pre + "eh_proj.weight"] = ((c.h, 2 * c.h), "normal")
        norm(pre + "final_layernorm", c.h)
    return P


def init_params(c, seed=1234, dtype=torch.float32):
    """Fresh parameters with Megatron's initialisation (torch's RNG, not
    megatrain's: for benches, not for bitwise comparisons)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, (shape, init) in expected_params(c).items():
        if init in ("normal", "scaled"):
            std = c.std / math.sqrt(2 * c.L) if init == "scaled" else c.std
            t = torch.randn(shape, generator=gen, dtype=dtype) * std
        else:
            t = (torch.ones if init == "ones" else torch.zeros)(shape, dtype=dtype)
        out[name] = t.requires_grad_(True)
    return out


def no_weight_decay(c, name, shape):
    """Megatron's parameter groups (megatron/core/optimizer get_standard_config_overrides):
    no decay on 1-D tensors (norm weights, biases) and on *.bias; with
    apply_wd_to_qk_layernorm the q_layernorm / k_layernorm tensors are decayed."""
    skip = len(shape) == 1 or name.endswith(".bias")
    if c.wd_qk_ln and ("q_layernorm." in name or "k_layernorm." in name):
        return False
    return skip


# ---- building blocks ----

def normalize(c, x, P, name):
    w = P[name + ".weight"]
    if c.norm == "RMSNorm":
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c.eps) * w
    return F.layer_norm(x, (x.shape[-1],), w, P[name + ".bias"], c.eps)


def linear(x, P, name):
    y = x @ P[name + ".weight"].T
    b = P.get(name + ".bias")
    return y if b is None else y + b


def llama31_scaled(inv_freq, factor, low=1.0, high=4.0, old_context=8192.0):
    """Llama-3.1's RoPE frequency scaling (Meta's apply_scaling in the
    Llama 3.1 release; Megatron's --use-rope-scaling), per channel pair:
    a wavelength 2 pi / f shorter than old_context / high keeps f, one longer
    than old_context / low becomes f / factor, in between the two are mixed
    with weight t = (old_context / wavelength - low) / (high - low) on f."""
    out = []
    for f in inv_freq.tolist():
        wavelength = 2.0 * math.pi / f
        if wavelength < old_context / high:
            out.append(f)
        elif wavelength > old_context / low:
            out.append(f / factor)
        else:
            t = (old_context / wavelength - low) / (high - low)
            out.append((1.0 - t) * f / factor + t * f)
    return torch.tensor(out, dtype=torch.float64)


def rope_tables(c, s, dtype):
    """cos, sin [s, rot_dim] for positions 0..s-1 (computed in float64)."""
    inv_freq = 1.0 / (c.rotary_base ** (torch.arange(0, c.rot_dim, 2, dtype=torch.float64) / c.rot_dim))
    if c.use_rope_scaling:
        inv_freq = llama31_scaled(inv_freq, c.rope_scaling_factor)
    angles = torch.outer(torch.arange(s, dtype=torch.float64), inv_freq)  # [s, rot_dim/2]
    if c.rotary_interleaved:
        emb = angles.repeat_interleave(2, dim=-1)  # theta_0 theta_0 theta_1 theta_1 ...
    else:
        emb = torch.cat((angles, angles), dim=-1)  # theta_0 .. theta_{r/2-1} theta_0 ..
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x, interleaved):
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((-x2, x1), dim=-1).flatten(-2)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(c, t, cos, sin):
    """t [b, s, heads, hn]; cos/sin [s, rot_dim]."""
    r = c.rot_dim
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    rot = t[..., :r] * cos + rotate_half(t[..., :r], c.rotary_interleaved) * sin
    return torch.cat((rot, t[..., r:]), dim=-1)


def ltor_masks_and_position_ids(c, data):
    """Megatron's _get_ltor_masks_and_position_ids for one sample's input
    tokens data [s]: the explicit [s, s] attention mask (True = may attend),
    the loss mask [s] and the position ids [s], built as Megatron builds them
    (a lower triangle; for each EOD at i: rows after i lose columns <= i;
    positions after i restart; no loss where the input token is the EOD)."""
    s = data.numel()
    allowed = torch.tril(torch.ones(s, s, dtype=torch.float64))
    loss_mask = torch.ones(s, dtype=torch.float64)
    if c.eod_mask_loss:
        loss_mask[data == c.eod] = 0.0
    position_ids = torch.arange(s, dtype=torch.long)
    if c.reset_position_ids or c.reset_attention_mask:
        eod_index = position_ids[data == c.eod].clone()
        prev_index = 0
        for j in range(eod_index.numel()):
            i = int(eod_index[j])
            if c.reset_attention_mask:
                allowed[i + 1:, :i + 1] = 0
            if c.reset_position_ids:
                position_ids[i + 1:] -= i + 1 - prev_index
                prev_index = i + 1
    return allowed >= 0.5, loss_mask, position_ids


def attention(c, x, P, pre, sdpa=False, allowed=None):
    """Self-attention block output (before the residual) for x [b, s, h];
    allowed [b, s, s] (True = query may see key) replaces the causal mask."""
    if c.mla:
        return mla_reference.attention(c, x, P, pre, normalize, allowed)
    b, s, _ = x.shape
    nq = c.nh // c.ng
    qkv = linear(x, P, pre + "linear_qkv").view(b, s, c.ng, nq + 2, c.hn)
    q = qkv[:, :, :, :nq, :].reshape(b, s, c.nh, c.hn)  # head n = g * nq + j
    k = qkv[:, :, :, nq, :]  # [b, s, ng, hn]
    v = qkv[:, :, :, nq + 1, :]
    if c.qk_ln:
        q = normalize(c, q, P, pre + "q_layernorm")
        k = normalize(c, k, P, pre + "k_layernorm")
    if c.pos == "rope":
        cos, sin = rope_tables(c, s, x.dtype)
        q, k = apply_rope(c, q, cos, sin), apply_rope(c, k, cos, sin)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [b, heads, s, hn]
    k = k.repeat_interleave(nq, dim=1)  # HF repeat_kv: query head n uses group n // nq
    v = v.repeat_interleave(nq, dim=1)
    if allowed is not None:  # explicit document mask (reset_attention_mask)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(c.hn)
        ctx = torch.softmax(scores.masked_fill(~allowed[:, None], float("-inf")), dim=-1) @ v
    elif sdpa and hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(c.hn)
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        ctx = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v
    ctx = ctx.transpose(1, 2).reshape(b, s, c.nh * c.hn)
    return linear(ctx, P, pre + "linear_proj")


def mlp(c, x, P, pre, ffn):
    f1 = linear(x, P, pre + "linear_fc1")
    if c.swiglu:
        a = F.silu(f1[..., :ffn]) * f1[..., ffn:]
    else:
        a = F.gelu(f1, approximate="tanh")
    return linear(a, P, pre + "linear_fc2")


def moe(c, x, P, pre, layer=None):
    """MoE MLP for x [b, s, h] -> (out [b, s, h], aux objective term); layer:
    the global layer index (default: read from a decoder.layers.N. prefix)."""
    b, s, h = x.shape
    xt = x.transpose(0, 1).reshape(s * b, h)  # megatrain's token order [s, b]
    logits = xt @ P[pre + "mlp.router.weight"].T
    if layer is None:
        layer = int(pre.split(".")[2])
    bias = c.expert_bias[c.moe_index(layer)] if c.expert_bias else None
    expert, kept, gates, lb, z, _ = route(logits, c, bias)
    out = torch.zeros_like(xt)
    for e in range(c.E):
        tok, slot = np.nonzero((expert == e) & kept)
        if len(tok) == 0:
            continue
        tok_t, slot_t = torch.tensor(tok), torch.tensor(slot)
        y = mlp(c, xt[tok_t], P, pre + "mlp.experts.%d." % e, c.moe_ffn)
        out = out.index_add(0, tok_t, gates[tok_t, slot_t].unsqueeze(-1) * y)
    y = out.view(s, b, h).transpose(0, 1)
    if c.shared:  # routed + shared (Megatron's MoELayer: output + shared_expert_output)
        y = y + mlp(c, x, P, pre + "mlp.shared_experts.", c.shared)
    return y, c.lb_coeff * lb + c.z_coeff * z


def forward(c, P, batch, sdpa=False):
    """batch [b, s+1] int64 -> (mean token cross-entropy, objective), where
    the objective adds the MoE auxiliary losses (equal without MoE)."""
    x_ids, y_ids = batch[:, :-1], batch[:, 1:]
    s = x_ids.shape[1]
    docs = c.reset_attention_mask or c.reset_position_ids or c.eod_mask_loss
    if docs:
        m = [ltor_masks_and_position_ids(c, row) for row in x_ids]
        allowed = torch.stack([a for a, _, _ in m]) if c.reset_attention_mask else None
        loss_mask = torch.stack([lm for _, lm, _ in m])
        pos_ids = torch.stack([p for _, _, p in m])
    else:
        allowed, loss_mask, pos_ids = None, None, torch.arange(s)[None]
    x = P["embedding.word_embeddings.weight"][x_ids]
    if c.pos == "learned_absolute":
        x = x + P["embedding.position_embeddings.weight"][pos_ids]
    aux = 0.0
    for l in range(c.L):
        pre = "decoder.layers.%d." % l
        x = x + attention(c, normalize(c, x, P, pre + "input_layernorm"), P, pre + "self_attention.", sdpa,
                          allowed)
        ln2 = normalize(c, x, P, pre + "pre_mlp_layernorm")
        if c.is_moe(l):
            y, a = moe(c, ln2, P, pre)
            aux = aux + a
        else:
            y = mlp(c, ln2, P, pre + "mlp.", c.ffn)
        x = x + y
    x = normalize(c, x, P, "decoder.final_layernorm")
    w_out = P["output_layer.weight"] if c.untie else P["embedding.word_embeddings.weight"]
    if c.mtp:  # multi-token prediction: its weighted losses join the objective
        from mtp_reference import mtp_objective
        m_obj, m_aux, _ = mtp_objective(c, P, x_ids, y_ids, loss_mask, x, w_out, sdpa)
        aux = aux + m_obj + m_aux
    logits = (x @ w_out.T)[..., :c.V]  # padded vocabulary never enters the softmax
    if loss_mask is None:
        ce = F.cross_entropy(logits.reshape(-1, c.V), y_ids.reshape(-1))
    else:  # Megatron's loss_func: sum(losses * loss_mask) / loss_mask.sum()
        losses = F.cross_entropy(logits.reshape(-1, c.V), y_ids.reshape(-1), reduction="none")
        lm = loss_mask.reshape(-1).to(losses.dtype)
        ce = (losses * lm).sum() / lm.sum()
    return ce, ce + aux


# ---- a gpt_dump directory ----

def load_tensor(d, name, shape, dtype=np.float32):
    return np.fromfile(os.path.join(d, name + ".bin"), dtype=dtype).reshape(shape)


class Reference:
    """The model of one gpt_dump directory: config, initial parameters (fp64
    by default), token batches and AdamW as megatrain runs it."""

    def __init__(self, dump_dir, dtype=torch.float64):
        with open(os.path.join(dump_dir, "meta.json")) as f:
            self.meta = json.load(f)
        self.dir = dump_dir
        self.cfg = Config(self.meta["config"])
        self.params, self.no_wd, self.shapes = {}, {}, {}
        for p in self.meta["params"]:
            rows, cols = p["shape"]
            shape = (cols,) if rows == 1 else (rows, cols)
            a = load_tensor(dump_dir, "init." + p["name"], shape)
            self.params[p["name"]] = torch.tensor(a, dtype=dtype, requires_grad=True)
            self.shapes[p["name"]] = shape
            # the groups are the reference's own rule; megatrain's flags must agree
            self.no_wd[p["name"]] = no_weight_decay(self.cfg, p["name"], shape)
            assert self.no_wd[p["name"]] == bool(p["no_weight_decay"]), \
                "weight decay of %s: megatrain %s, Megatron's rule %s" % (
                    p["name"], "none" if p["no_weight_decay"] else "on",
                    "none" if self.no_wd[p["name"]] else "on")

    def tokens(self):
        c = self.cfg
        t = np.fromfile(os.path.join(self.dir, "tokens.bin"), dtype=np.int32)
        return torch.tensor(t.reshape(-1, c.b, c.s + 1).astype(np.int64))

    def loss(self, batch):
        return forward(self.cfg, self.params, batch)

    def adamw(self, lrs):
        o = self.meta["adamw"]
        groups = [
            {"params": [p for n, p in self.params.items() if not self.no_wd[n]], "weight_decay": o["weight_decay"]},
            {"params": [p for n, p in self.params.items() if self.no_wd[n]], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=lrs[0], betas=(o["beta1"], o["beta2"]), eps=o["eps"])
