#!/usr/bin/python3
"""Independent PyTorch forward of a Hugging Face model directory (GPT-2,
Llama, Qwen3, Qwen3-MoE, Mixtral or DeepSeek-V3's MoE side with standard
attention), written from the Hugging Face layout alone: its own safetensors
reader (struct + json + numpy), the config.json keys, and the published
model definitions (GPT-2: Radford et al. 2019 / HF GPT2LMHeadModel with
Conv1D weights [in, out] and fused c_attn [q | k | v]; Llama: Touvron et al.
2023 / HF LlamaForCausalLM: RMSNorm, rotate-half RoPE, grouped-query
attention via repeat_kv, SwiGLU; Qwen3: Llama's with a per-head RMSNorm of q
and k before RoPE). No transformers library, no megatrain code.
float64 throughout.

Usage:
  hf_forward.py loss HF_DIR TOKENS_FILE SEQ
      mean next-token cross-entropy (nats) over TOKENS_FILE: int32 samples of
      SEQ + 1 tokens (inputs [:SEQ], targets [1:]); prints "%.12e".
  hf_forward.py greedy HF_DIR "ID ID ..." N
      greedy decode of N tokens after the prompt ids (whole-sequence
      recompute, argmax over the vocabulary, lowest id on ties; stops after
      the GPT-2 end-of-text 50256); prints "ids: " and prompt + continuation.
  hf_forward.py same HF_DIR_A HF_DIR_B
      the two directories hold the same tensor names, shapes and float32
      values bit for bit (bf16 / f16 widened); exit 1 naming the first
      difference.
  hf_forward.py selftest
      the reader against hand-made files, and GQA/RoPE against per-head loops.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

DT = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64,
      "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_,
      "BF16": np.uint16}


def read_file(path):
    """{name: numpy array} of one safetensors file; BF16 returned as float32."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert 8 + n <= len(raw), "%s: header length %d beyond the file" % (path, n)
    hdr = json.loads(raw[8:8 + n].decode("utf-8"))
    buf = memoryview(raw)[8 + n:]
    out = {}
    for name, e in hdr.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        dt = np.dtype(DT[e["dtype"]]).newbyteorder("<")
        a = np.frombuffer(buf[b:en], dtype=dt).reshape(e["shape"])
        if e["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.copy()
    return out, hdr.get("__metadata__", {})


def read_dir(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        wm = json.load(open(idx))["weight_map"]
        out = {}
        for fn in sorted(set(wm.values())):
            t, _ = read_file(os.path.join(d, fn))
            for k, v in t.items():
                assert wm[k] == fn, (k, fn)
                out[k] = v
        assert set(out) == set(wm), "index and files disagree"
        return out
    return read_file(os.path.join(d, "model.safetensors"))[0]


def T(a):
    return torch.tensor(np.asarray(a, dtype=np.float64))


def cross_entropy(logits, targets):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             targets.reshape(-1), reduction="sum").item()


def gpt2_forward(w, cfg, ids):
    """logits [b, s, V] of GPT2LMHeadModel (eval: no dropout)."""
    nh, eps = cfg["n_head"], cfg.get("layer_norm_epsilon", 1e-5)
    assert cfg.get("activation_function", "gelu_new") in ("gelu_new", "gelu_pytorch_tanh")
    p = "transformer." if "transformer.wte.weight" in w else ""
    b, s = ids.shape
    x = T(w[p + "wte.weight"])[ids] + T(w[p + "wpe.weight"])[torch.arange(s)]
    h = x.shape[-1]
    hd = h // nh
    ln = lambda t, n: torch.nn.functional.layer_norm(t, (h,), T(w[n + ".weight"]), T(w[n + ".bias"]), eps)
    conv1d = lambda t, n: t @ T(w[n + ".weight"]) + T(w[n + ".bias"])  # Conv1D: [in, out]
    mask = torch.ones(s, s, dtype=torch.bool).tril()
    for i in range(cfg["n_layer"]):
        q_ = "%sh.%d." % (p, i)
        a = conv1d(ln(x, q_ + "ln_1"), q_ + "attn.c_attn")
        q, k, v = a.split(h, dim=-1)
        heads = lambda t: t.view(b, s, nh, hd).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, h)
        x = x + conv1d(y, q_ + "attn.c_proj")
        m = conv1d(ln(x, q_ + "ln_2"), q_ + "mlp.c_fc")
        m = 0.5 * m * (1 + torch.tanh(math.sqrt(2 / math.pi) * (m + 0.044715 * m ** 3)))  # gelu_new
        x = x + conv1d(m, q_ + "mlp.c_proj")
    x = ln(x, p + "ln_f")
    head = w["lm_head.weight"] if "lm_head.weight" in w and not cfg.get("tie_word_embeddings", True) \
        else w[p + "wte.weight"]
    return x @ T(head).T


def rotate_half(t):
    t1, t2 = t.chunk(2, dim=-1)
    return torch.cat((-t2, t1), dim=-1)


def qwen3_moe_sparse(cfg, i):
    """Qwen3MoeDecoderLayer: layer i has the sparse MoE block unless it is in
    mlp_only_layers, when num_experts > 0 and (i + 1) % decoder_sparse_step == 0."""
    return (i not in cfg.get("mlp_only_layers", []) and cfg["num_experts"] > 0
            and (i + 1) % cfg.get("decoder_sparse_step", 1) == 0)


def moe_block(t, w, p, names, norm_topk, cfg):
    """Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock (eval: no router jitter):
    softmax over all experts of gate(t), the top num_experts_per_tok
    probabilities (renormalised to sum 1 when norm_topk: Mixtral always,
    Qwen3-MoE with norm_topk_prob), each chosen expert's SwiGLU MLP
    down(silu(gate(t)) * up(t)) weighted by its probability, summed. Written
    as a loop over tokens and their chosen experts."""
    b, s, h = t.shape
    x = t.reshape(-1, h)
    probs = (x @ T(w[p + "gate.weight"]).T).softmax(-1)
    k = cfg["num_experts_per_tok"]
    top, idx = probs.topk(k, dim=-1)
    if norm_topk:
        top = top / top.sum(-1, keepdim=True)
    out = torch.zeros_like(x)
    g_, u_, d_ = names
    for e in idx.unique().tolist():
        tok, slot = (idx == e).nonzero(as_tuple=True)
        q = p + "experts.%d." % e
        y = x[tok]
        y = torch.nn.functional.silu(y @ T(w[q + g_ + ".weight"]).T) * (y @ T(w[q + u_ + ".weight"]).T)
        out.index_add_(0, tok, (y @ T(w[q + d_ + ".weight"]).T) * top[tok, slot][:, None])
    return out.reshape(b, s, h)


def deepseek_moe(t, w, p, cfg):
    """DeepseekV3MoE (DeepSeek-V3 report §2.1.2, HF DeepseekV3TopkRouter with
    topk_method noaux_tc): scores = sigmoid(gate(t)); choice = scores +
    e_score_correction_bias; the experts in n_group equal groups, a group
    scored by the sum of its two best choices, the topk_group best groups
    kept (the others' choices set to 0.0 as HF does); the top
    num_experts_per_tok choices; weights = their unbiased scores, divided by
    their sum + 1e-20 when norm_topk_prob, times routed_scaling_factor; plus
    the shared experts (one SwiGLU MLP) on every token."""
    b, s, h = t.shape
    x = t.reshape(-1, h)
    scores = (x @ T(w[p + "gate.weight"]).T).sigmoid()
    choice = scores + T(w[p + "gate.e_score_correction_bias"])
    E, G, k = choice.shape[-1], cfg.get("n_group", 1), cfg["num_experts_per_tok"]
    grp = choice.view(-1, G, E // G).topk(2, dim=-1)[0].sum(-1)
    keep = torch.zeros_like(grp).scatter_(1, grp.topk(cfg.get("topk_group", 1), dim=-1)[1], 1.0)
    mask = keep.unsqueeze(-1).expand(-1, G, E // G).reshape(-1, E)
    idx = choice.masked_fill(mask == 0, 0.0).topk(k, dim=-1)[1]
    top = scores.gather(1, idx)
    if cfg.get("norm_topk_prob", True):
        top = top / (top.sum(-1, keepdim=True) + 1e-20)
    top = top * cfg.get("routed_scaling_factor", 1.0)
    out = torch.zeros_like(x)
    for e in idx.unique().tolist():
        tok, slot = (idx == e).nonzero(as_tuple=True)
        q = p + "experts.%d." % e
        y = x[tok]
        y = torch.nn.functional.silu(y @ T(w[q + "gate_proj.weight"]).T) * (y @ T(w[q + "up_proj.weight"]).T)
        out.index_add_(0, tok, (y @ T(w[q + "down_proj.weight"]).T) * top[tok, slot][:, None])
    if p + "shared_experts.gate_proj.weight" in w:
        q = p + "shared_experts."
        out = out + (torch.nn.functional.silu(x @ T(w[q + "gate_proj.weight"]).T)
                     * (x @ T(w[q + "up_proj.weight"]).T)) @ T(w[q + "down_proj.weight"]).T
    return out.reshape(b, s, h)


def yarn_get_mscale(scale, m=1.0):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def deepseek_rope(cfg, s):
    """cos, sin [s, dr] of DeepseekV3RotaryEmbedding (rotate-half layout, emb =
    cat(freqs, freqs)): plain RoPE over dim = qk_rope_head_dim, or with
    rope_scaling type yarn transformers' _compute_yarn_parameters (Peng et al.
    2023): factor = max_position_embeddings / original_max_position_embeddings
    when the latter is given, correction range floor/ceil of find_correction_dim
    for beta_fast/beta_slow over the original positions, inv_freq blending the
    interpolated and extrapolated frequencies with 1 - the linear ramp, and cos
    and sin multiplied by attention_factor = get_mscale(factor, mscale) /
    get_mscale(factor, mscale_all_dim) (get_mscale(factor) unless both set)."""
    dim, base = cfg["qk_rope_head_dim"], cfg.get("rope_theta", 10000.0)
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    inv_freq, att = 1.0 / pos_freqs, 1.0
    rs = cfg.get("rope_scaling")
    if rs is not None:
        assert rs.get("rope_type", rs.get("type")) == "yarn"
        factor = rs["factor"]
        orig = rs.get("original_max_position_embeddings")
        if orig is not None:
            factor = cfg["max_position_embeddings"] / orig
        else:
            orig = cfg["max_position_embeddings"]
        ms, msa = rs.get("mscale"), rs.get("mscale_all_dim")
        att = yarn_get_mscale(factor, ms) / yarn_get_mscale(factor, msa) if ms and msa \
            else yarn_get_mscale(factor)
        bf, bs = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

        def corr_dim(rot):
            return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
        lo, hi = max(math.floor(corr_dim(bf)), 0), min(math.ceil(corr_dim(bs)), dim - 1)
        if lo == hi:
            hi += 0.001
        ramp = ((torch.arange(dim // 2, dtype=torch.float64) - lo) / (hi - lo)).clamp(0, 1)
        extra = 1 - ramp
        inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extra) + (1.0 / pos_freqs) * extra
    freqs = torch.outer(torch.arange(s, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * att, emb.sin() * att


def mla_attention(t, w, p, cfg, cos, sin, mask, rms):
    """DeepseekV3Attention (DeepSeek-V2 section 2.1, HF modeling_deepseek_v3):
    q = q_b_proj(q_a_layernorm(q_a_proj(t))) (q_proj(t) when q_lora_rank is
    null) per head [nope | rope]; kv_a_proj_with_mqa(t) = [latent | k_rot],
    kv_b_proj(kv_a_layernorm(latent)) per head [k_nope | v]; k_rot one head
    shared by all; RoPE on q_rot/k_rot (rope_interleave: pairs (2i, 2i + 1)
    moved to halves, then rotate_half); softmax scale qk_head_dim^-0.5 times
    yarn_get_mscale(factor, mscale_all_dim)^2 with rope_scaling; o_proj."""
    b, s, _ = t.shape
    nh, dn, dr, dv = (cfg["num_attention_heads"], cfg["qk_nope_head_dim"],
                      cfg["qk_rope_head_dim"], cfg["v_head_dim"])
    kr = cfg["kv_lora_rank"]
    a = p + "self_attn."
    if cfg.get("q_lora_rank") is None:
        q = t @ T(w[a + "q_proj.weight"]).T
    else:
        q = rms(t @ T(w[a + "q_a_proj.weight"]).T, a + "q_a_layernorm.weight") \
            @ T(w[a + "q_b_proj.weight"]).T
    q = q.view(b, s, nh, dn + dr).transpose(1, 2)
    q_pass, q_rot = q[..., :dn], q[..., dn:]
    ckv = t @ T(w[a + "kv_a_proj_with_mqa.weight"]).T
    k_pass, k_rot = ckv[..., :kr], ckv[..., kr:]
    kv = (rms(k_pass, a + "kv_a_layernorm.weight") @ T(w[a + "kv_b_proj.weight"]).T)
    kv = kv.view(b, s, nh, dn + dv).transpose(1, 2)
    k_pass, v = kv[..., :dn], kv[..., dn:]
    k_rot = k_rot.view(b, 1, s, dr)
    if cfg.get("rope_interleave", True):
        q_rot = q_rot.reshape(b, nh, s, dr // 2, 2).transpose(4, 3).reshape(b, nh, s, dr)
        k_rot = k_rot.reshape(b, 1, s, dr // 2, 2).transpose(4, 3).reshape(b, 1, s, dr)
    q_rot = q_rot * cos + rotate_half(q_rot) * sin
    k_rot = k_rot * cos + rotate_half(k_rot) * sin
    query = torch.cat((q_pass, q_rot), dim=-1)
    key = torch.cat((k_pass, k_rot.expand(b, nh, s, dr)), dim=-1)
    scale = (dn + dr) ** -0.5
    rs = cfg.get("rope_scaling")
    if rs is not None and rs.get("mscale_all_dim"):
        scale *= yarn_get_mscale(rs["factor"], rs["mscale_all_dim"]) ** 2
    att = (query @ key.transpose(-1, -2)) * scale
    att = att.masked_fill(~mask, float("-inf")).softmax(-1)
    y = (att @ v).transpose(1, 2).reshape(b, s, nh * dv)
    return y @ T(w[a + "o_proj.weight"]).T


def llama_forward(w, cfg, ids):
    """logits [b, s, V] of LlamaForCausalLM (no rope_scaling); Qwen3ForCausalLM
    when the layers have self_attn.{q,k}_norm (Yang et al. 2025, HF Qwen3Attention);
    Qwen3MoeForCausalLM and MixtralForCausalLM (Jiang et al. 2024) with their
    sparse MoE blocks (moe_block)."""
    mla = cfg["model_type"] == "deepseek_v3" and cfg.get("kv_lora_rank") is not None
    assert (mla or cfg.get("rope_scaling") is None) and cfg.get("hidden_act", "silu") == "silu"
    nh, h = cfg["num_attention_heads"], cfg["hidden_size"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or h // nh
    eps, theta = cfg.get("rms_norm_eps", 1e-6), cfg.get("rope_theta", 10000.0)
    b, s = ids.shape

    def rms(t, n):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps) * T(w[n])

    def lin(t, n):
        y = t @ T(w[n + ".weight"]).T  # nn.Linear: [out, in]
        return y + T(w[n + ".bias"]) if n + ".bias" in w else y

    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs = torch.outer(torch.arange(s, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.ones(s, s, dtype=torch.bool).tril()
    if mla:
        cos, sin = deepseek_rope(cfg, s)
    x = T(w["model.embed_tokens.weight"])[ids]
    for i in range(cfg["num_hidden_layers"]):  # (DeepSeek's MTP layers follow: not read)
        p = "model.layers.%d." % i
        t = rms(x, p + "input_layernorm.weight")
        if mla:
            x = x + mla_attention(t, w, p, cfg, cos, sin, mask, rms)
            t = rms(x, p + "post_attention_layernorm.weight")
        else:
            q = lin(t, p + "self_attn.q_proj").view(b, s, nh, hd).transpose(1, 2)
            k = lin(t, p + "self_attn.k_proj").view(b, s, nkv, hd).transpose(1, 2)
            v = lin(t, p + "self_attn.v_proj").view(b, s, nkv, hd).transpose(1, 2)
            if p + "self_attn.q_norm.weight" in w:  # Qwen3: RMSNorm of each head, before RoPE
                q, k = rms(q, p + "self_attn.q_norm.weight"), rms(k, p + "self_attn.k_norm.weight")
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            rep = nh // nkv  # repeat_kv: query head n reads kv head n // rep
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(b, s, nh * hd)
            x = x + lin(y, p + "self_attn.o_proj")
            t = rms(x, p + "post_attention_layernorm.weight")
        if cfg["model_type"] == "mixtral":
            x = x + moe_block(t, w, p + "block_sparse_moe.", ("w1", "w3", "w2"), True, cfg)
        elif cfg["model_type"] == "deepseek_v3" and i >= cfg.get("first_k_dense_replace", 0) \
                and i % cfg.get("moe_layer_freq", 1) == 0:
            x = x + deepseek_moe(t, w, p + "mlp.", cfg)
        elif cfg["model_type"] == "qwen3_moe" and qwen3_moe_sparse(cfg, i):
            x = x + moe_block(t, w, p + "mlp.", ("gate_proj", "up_proj", "down_proj"),
                              cfg.get("norm_topk_prob", False), cfg)
        else:
            g = lin(t, p + "mlp.gate_proj")
            x = x + lin(torch.nn.functional.silu(g) * lin(t, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms(x, "model.norm.weight")
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else w["lm_head.weight"]
    return x @ T(head).T


def loss(hf_dir, tokens_file, seq):
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    w = read_dir(hf_dir)
    tok = np.fromfile(tokens_file, dtype="<i4").reshape(-1, seq + 1)
    ids = torch.tensor(tok[:, :seq].astype(np.int64))
    tgt = torch.tensor(tok[:, 1:].astype(np.int64))
    fwd = {"gpt2": gpt2_forward, "llama": llama_forward, "qwen3": llama_forward,
           "qwen3_moe": llama_forward, "mixtral": llama_forward,
           "deepseek_v3": llama_forward}[cfg["model_type"]]
    with torch.no_grad():
        logits = fwd(w, cfg, ids)
    return cross_entropy(logits, tgt) / tgt.numel()


def greedy(hf_dir, ids, n):
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    w = read_dir(hf_dir)
    fwd = {"gpt2": gpt2_forward, "llama": llama_forward, "qwen3": llama_forward,
           "qwen3_moe": llama_forward, "mixtral": llama_forward,
           "deepseek_v3": llama_forward}[cfg["model_type"]]
    with torch.no_grad():
        for _ in range(n):
            nxt = int(torch.argmax(fwd(w, cfg, torch.tensor([ids]))[0, -1]))
            ids.append(nxt)
            if nxt == 50256:
                break
    return ids


def selftest():
    import tempfile
    d = tempfile.mkdtemp()
    # a hand-made file: header padded, bf16 and f32
    hdr = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "BF16", "shape": [1], "data_offsets": [8, 10]},
           "__metadata__": {"format": "pt"}}
    hb = json.dumps(hdr).encode()
    hb += b" " * (-len(hb) % 8)
    data = struct.pack("<2f", 1.5, -2.0) + struct.pack("<H", 0x3fc0)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + data)
    t = read_dir(d)
    assert t["a"].tolist() == [1.5, -2.0] and t["b"].tolist() == [1.5], t
    # rotate_half RoPE = complex rotation of pairs (i, i + hd/2)
    hd, s = 8, 5
    x = torch.randn(s, hd, dtype=torch.float64)
    inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.outer(torch.arange(s, dtype=torch.float64), inv)
    emb = torch.cat((ang, ang), -1)
    y = x * emb.cos() + rotate_half(x) * emb.sin()
    z = torch.view_as_real(torch.complex(x[:, :hd // 2], x[:, hd // 2:]) * torch.polar(torch.ones_like(ang), ang))
    assert torch.allclose(y, torch.cat((z[..., 0], z[..., 1]), -1))
    print("hf_forward selftest: OK")


def main():
    if sys.argv[1] == "loss":
        print("%.12e" % loss(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    elif sys.argv[1] == "greedy":
        print("ids: " + " ".join(str(t) for t in greedy(sys.argv[2], [int(t) for t in sys.argv[3].split()],
                                                        int(sys.argv[4]))))
    elif sys.argv[1] == "same":
        a, b = read_dir(sys.argv[2]), read_dir(sys.argv[3])
        if sorted(a) != sorted(b):
            sys.exit("tensor names differ: %s" % sorted(set(a) ^ set(b))[:5])
        sub = 0
        for k in a:
            x, y = a[k].astype(np.float32), b[k].astype(np.float32)
            if x.shape != y.shape or x.tobytes() != y.tobytes():
                sys.exit("tensor %s differs" % k)
            sub += int(((x != 0) & (abs(x) < 6.104e-5)).sum())
        print("%d tensors bitwise equal (%d values below fp16's smallest normal)" % (len(a), sub))
    elif sys.argv[1] == "selftest":
        selftest()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
