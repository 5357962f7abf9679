"""Independent PyTorch reference of multi-latent attention (MLA), written from
DeepSeek-V2's paper §2.1 (arXiv:2405.04434, eqs. 9-19), YaRN (Peng et al.
2023, arXiv:2309.00071, §3.2 "NTK-by-parts" and §3.4 the attention factor)
and Megatron-core's documented MLA semantics (MLATransformerConfig,
MLASelfAttention, YarnRotaryEmbedding), not from megatrain's C code.
tests/reference/llama_reference.py calls it when the config has
multi_latent_attention.

Per layer, x [b, s, h] (after input_layernorm), n heads, dn = qk_head_dim,
dr = qk_pos_emb_head_dim, dv = v_head_dim, qr = q_lora_rank, kr = kv_lora_rank:
  q      = x Wq^T                       (qr null: linear_q_proj [n(dn+dr), h])
         = norm_q(x Wqd^T) Wqu^T        (linear_q_down_proj [qr, h], q_layernorm
                                         [qr] only with qk_layernorm,
                                         linear_q_up_proj [n(dn+dr), qr])
  c, kpe = split(x Wkvd^T, [kr, dr])    (linear_kv_down_proj [kr+dr, h])
  k_nope, v = split(norm_kv(c) Wkvu^T per head, [dn, dv])
                                        (kv_layernorm [kr] with qk_layernorm,
                                         linear_kv_up_proj [n(dn+dv), kr])
  q_nope, q_pe = split(q per head, [dn, dr])
  q_pe, kpe turned by RoPE over pairs (2i, 2i+1) with frequency inv_i
         (YaRN-scaled with rope_type yarn) and cos/sin times
         mscale(s, mscale) / mscale(s, mscale_all_dim) (yarn only);
  q = [q_nope, q_pe], k = [k_nope, kpe (the same for every head)];
  ctx = softmax(scale q k^T + causal) v, scale = mscale(s, mscale_all_dim)^2
        / sqrt(dn + dr), mscale(s, m) = 0.1 m ln s + 1 (s > 1, else 1),
        s = rotary_scaling_factor;
  out = ctx Wo^T (linear_proj [h, n dv], bias with add_bias_linear).
No bias on the q/kv projections.
"""
import math

import torch


def parse(c, d):
    """MLA options of a meta.json config dict onto c (llama_reference.Config)."""
    c.mla = bool(d.get("multi_latent_attention", False))
    if not c.mla:
        return
    c.qr = int(d.get("q_lora_rank") or 0)
    c.kr = int(d["kv_lora_rank"])
    c.dn = int(d["qk_head_dim"])
    c.dr = int(d["qk_pos_emb_head_dim"])
    c.dv = int(d["v_head_dim"])
    c.yarn = d.get("rope_type", "yarn") == "yarn"
    c.yarn_s = float(d.get("rotary_scaling_factor", 1.0))
    c.yarn_L = float(d.get("original_max_position_embeddings", 4096))
    c.beta_fast = float(d.get("beta_fast", 32))
    c.beta_slow = float(d.get("beta_slow", 1))
    c.mscale = float(d.get("mscale", 1.0))
    c.mscale_all_dim = float(d.get("mscale_all_dim", 0.0))


def expected(c, P, pre, norm):
    """Add layer pre's MLA parameters to P (name -> (shape, init))."""
    hq = c.dn + c.dr
    a = pre + "self_attention."
    if c.qr:
        P[a + "linear_q_down_proj.weight"] = ((c.qr, c.h), "normal")
        if c.qk_ln:
            norm(a + "q_layernorm", c.qr)
        P[a + "linear_q_up_proj.weight"] = ((c.nh * hq, c.qr), "normal")
    else:
        P[a + "linear_q_proj.weight"] = ((c.nh * hq, c.h), "normal")
    P[a + "linear_kv_down_proj.weight"] = ((c.kr + c.dr, c.h), "normal")
    if c.qk_ln:
        norm(a + "kv_layernorm", c.kr)
    P[a + "linear_kv_up_proj.weight"] = ((c.nh * (c.dn + c.dv), c.kr), "normal")
    P[a + "linear_proj.weight"] = ((c.h, c.nh * c.dv), "scaled")
    if c.bias:
        P[a + "linear_proj.bias"] = ((c.h,), "zeros")


def get_mscale(s, m):
    return 1.0 if s <= 1.0 else 0.1 * m * math.log(s) + 1.0


def inv_freq(c):
    """[dr/2] inverse frequencies (float64), YaRN-scaled with rope_type yarn."""
    d, base = c.dr, c.rotary_base
    extra = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    if not c.yarn:
        return extra
    inter = extra / c.yarn_s

    def dim_of(rot):  # channel index whose wavelength makes `rot` turns over L
        return d * math.log(c.yarn_L / (rot * 2 * math.pi)) / (2 * math.log(base))

    lo = max(math.floor(dim_of(c.beta_fast)), 0)
    hi = min(math.ceil(dim_of(c.beta_slow)), d - 1)
    if lo == hi:
        hi += 0.001
    ramp = ((torch.arange(d // 2, dtype=torch.float64) - lo) / (hi - lo)).clamp(0, 1)
    # ramp 0: fast channels keep their frequency; 1: slow ones interpolated by s
    return extra * (1 - ramp) + inter * ramp


def rope_pairs(c, t, s):
    """t [b, s, heads, dr]: pairs (2i, 2i+1) turned by pos * inv_i."""
    ang = torch.outer(torch.arange(s, dtype=torch.float64), inv_freq(c))  # [s, dr/2]
    f = get_mscale(c.yarn_s, c.mscale) / get_mscale(c.yarn_s, c.mscale_all_dim) if c.yarn else 1.0
    cos = (ang.cos() * f).to(t.dtype)[None, :, None, :]
    sin = (ang.sin() * f).to(t.dtype)[None, :, None, :]
    a, b = t[..., 0::2], t[..., 1::2]
    return torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)


def attention(c, x, P, pre, normalize, allowed=None):
    """MLA block output (before the residual) for x [b, s, h]; pre ends in
    'self_attention.'; normalize(c, x, P, name) is the model's norm."""
    b, s, _ = x.shape
    n, hq = c.nh, c.dn + c.dr
    if c.qr:
        cq = x @ P[pre + "linear_q_down_proj.weight"].T
        if c.qk_ln:
            cq = normalize(c, cq, P, pre + "q_layernorm")
        q = cq @ P[pre + "linear_q_up_proj.weight"].T
    else:
        q = x @ P[pre + "linear_q_proj.weight"].T
    q = q.view(b, s, n, hq)
    ckv = x @ P[pre + "linear_kv_down_proj.weight"].T
    ckv_c, kpe = ckv[..., :c.kr], ckv[..., c.kr:]
    if c.qk_ln:
        ckv_c = normalize(c, ckv_c, P, pre + "kv_layernorm")
    kv = (ckv_c @ P[pre + "linear_kv_up_proj.weight"].T).view(b, s, n, c.dn + c.dv)
    k_nope, v = kv[..., :c.dn], kv[..., c.dn:]
    q_pe = rope_pairs(c, q[..., c.dn:], s)
    kpe = rope_pairs(c, kpe.view(b, s, 1, c.dr), s).expand(b, s, n, c.dr)
    qh = torch.cat((q[..., :c.dn], q_pe), -1).transpose(1, 2)  # [b, n, s, hq]
    kh = torch.cat((k_nope, kpe), -1).transpose(1, 2)
    vh = v.transpose(1, 2)
    scale = get_mscale(c.yarn_s, c.mscale_all_dim) ** 2 / math.sqrt(hq)
    scores = (qh @ kh.transpose(-1, -2)) * scale
    if allowed is not None:
        scores = scores.masked_fill(~allowed[:, None], float("-inf"))
    else:
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
    ctx = torch.softmax(scores, dim=-1) @ vh
    ctx = ctx.transpose(1, 2).reshape(b, s, n * c.dv)
    y = ctx @ P[pre + "linear_proj.weight"].T
    bias = P.get(pre + "linear_proj.bias")
    return y if bias is None else y + bias
