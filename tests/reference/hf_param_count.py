#!/usr/bin/python3
"""Total and activated parameter counts of Hugging Face MoE models, computed
from their published config.json shapes by enumerating the tensors each HF
model class creates (no transformers, no megatrain code): the independent
side of the planner's parameter-count check (issue 31 item 6).

Tensors per class (shapes as [out, in]):
- every model: embed_tokens [V, h], per layer input_layernorm [h] and
  post_attention_layernorm [h], final norm [h], lm_head [V, h] unless tied;
- Mixtral / Qwen3-MoE attention: q_proj [nh*hd, h], k_proj and v_proj
  [nkv*hd, h], o_proj [h, nh*hd] (+ q_norm, k_norm [hd] for Qwen3-MoE);
- DeepSeek-V2/V3 multi-latent attention: q_proj [nh*(nope+rope), h], or with
  q_lora_rank q_a_proj [q_lora, h], q_a_layernorm [q_lora], q_b_proj
  [nh*(nope+rope), q_lora]; kv_a_proj_with_mqa [kv_lora+rope, h],
  kv_a_layernorm [kv_lora], kv_b_proj [nh*(nope+v), kv_lora], o_proj
  [h, nh*v];
- a SwiGLU MLP of width f: gate_proj, up_proj [f, h], down_proj [h, f];
- an MoE block: gate [E, h] (+ e_score_correction_bias [E] with DeepSeek-V3's
  noaux_tc routing), E experts of width F, DeepSeek's shared experts one MLP
  of width n_shared*F;
- DeepSeek-V3's MTP layers (num_nextn_predict_layers): enorm, hnorm [h],
  eh_proj [h, 2h], one decoder layer, shared_head.norm [h], and as stored in
  the checkpoint its own embed_tokens and shared_head.head [V, h].
Activated = the parameters one token uses: everything but the E − k routed
experts it does not pick in each MoE layer (MTP counted separately).

`check` compares with the planner's counts, which leave out what Megatron
and megatrain do not hold as parameters: the expert-bias buffers
(e_score_correction_bias) and the MTP depths' own copies of the embedding
and output head (shared with the main model).

usage: hf_param_count.py table
       hf_param_count.py check MODEL PLAN_JSON   (megatrain plan --json output)
"""
import json
import sys

# the published config.json values that shape the tensors
CONFIGS = {
    "mixtral-8x7b": dict(model_type="mixtral", vocab_size=32000, hidden_size=4096,
                         intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=8, num_local_experts=8, num_experts_per_tok=2,
                         tie_word_embeddings=False),
    "qwen3-30b-a3b": dict(model_type="qwen3_moe", vocab_size=151936, hidden_size=2048,
                          intermediate_size=6144, moe_intermediate_size=768, num_hidden_layers=48,
                          num_attention_heads=32, num_key_value_heads=4, head_dim=128,
                          num_experts=128, num_experts_per_tok=8, decoder_sparse_step=1,
                          mlp_only_layers=[], tie_word_embeddings=False),
    "deepseek-v3": dict(model_type="deepseek_v3", vocab_size=129280, hidden_size=7168,
                        intermediate_size=18432, moe_intermediate_size=2048, num_hidden_layers=61,
                        num_attention_heads=128, q_lora_rank=1536, kv_lora_rank=512,
                        qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
                        n_routed_experts=256, n_shared_experts=1, num_experts_per_tok=8,
                        first_k_dense_replace=3, moe_layer_freq=1, topk_method="noaux_tc",
                        num_nextn_predict_layers=1, tie_word_embeddings=False),
    "deepseek-v2-lite": dict(model_type="deepseek_v2", vocab_size=102400, hidden_size=2048,
                             intermediate_size=10944, moe_intermediate_size=1408,
                             num_hidden_layers=27, num_attention_heads=16, q_lora_rank=None,
                             kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                             v_head_dim=128, n_routed_experts=64, n_shared_experts=2,
                             num_experts_per_tok=6, first_k_dense_replace=1, moe_layer_freq=1,
                             topk_method="greedy", tie_word_embeddings=False),
}
PUBLISHED = {"mixtral-8x7b": "46.7B total, 12.9B activated",
             "qwen3-30b-a3b": "30.5B total, 3.3B activated",
             "deepseek-v3": "671B total + 14B MTP, 37B activated",
             "deepseek-v2-lite": "15.7B total, 2.4B activated"}


def mlp(h, f):
    return 3 * h * f


def attention(c):
    h, nh = c["hidden_size"], c["num_attention_heads"]
    if "kv_lora_rank" in c:  # multi-latent attention
        qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
        ql, kl = c["q_lora_rank"], c["kv_lora_rank"]
        q = nh * qk * h if not ql else ql * h + ql + nh * qk * ql
        kv = (kl + c["qk_rope_head_dim"]) * h + kl + nh * (c["qk_nope_head_dim"] + c["v_head_dim"]) * kl
        return q + kv + h * nh * c["v_head_dim"]
    hd = c.get("head_dim") or h // nh
    nkv = c.get("num_key_value_heads") or nh
    n = nh * hd * h + 2 * nkv * hd * h + h * nh * hd
    return n + (2 * hd if c["model_type"] == "qwen3_moe" else 0)


def is_moe(c, l):
    t = c["model_type"]
    if t == "mixtral":
        return True
    if t == "qwen3_moe":
        return l not in c["mlp_only_layers"] and (l + 1) % c["decoder_sparse_step"] == 0
    return l >= c["first_k_dense_replace"] and l % c["moe_layer_freq"] == 0


def moe_sizes(c):
    """(E, k, F, always-on part of the block: router, bias, shared experts)"""
    h, t = c["hidden_size"], c["model_type"]
    if t == "mixtral":
        return c["num_local_experts"], c["num_experts_per_tok"], c["intermediate_size"], \
            c["num_local_experts"] * h
    if t == "qwen3_moe":
        return c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"], c["num_experts"] * h
    E, F = c["n_routed_experts"], c["moe_intermediate_size"]
    fixed = E * h + (E if c["topk_method"] == "noaux_tc" else 0) + mlp(h, c["n_shared_experts"] * F)
    return E, c["num_experts_per_tok"], F, fixed


def layer(c, l):
    """(total, activated) of decoder layer l"""
    h = c["hidden_size"]
    base = attention(c) + 2 * h
    if not is_moe(c, l):
        n = base + mlp(h, c["intermediate_size"])
        return n, n
    E, k, F, fixed = moe_sizes(c)
    return base + fixed + E * mlp(h, F), base + fixed + k * mlp(h, F)


def count(name):
    """(total, activated, mtp total, mtp activated) of the main model and the MTP layers"""
    c = CONFIGS[name]
    h, V = c["hidden_size"], c["vocab_size"]
    emb = V * h * (1 if c["tie_word_embeddings"] else 2) + h
    tot, act = emb, emb
    L = c["num_hidden_layers"]
    for l in range(L):
        t, a = layer(c, l)
        tot, act = tot + t, act + a
    mt, ma = 0, 0
    for d in range(c.get("num_nextn_predict_layers", 0)):
        t, a = layer(c, L + d)
        extra = 2 * h + 2 * h * h + h + 2 * V * h  # enorm, hnorm, eh_proj, shared_head norm, embed + head
        mt, ma = mt + t + extra, ma + a + extra
    return tot, act, mt, ma


def main():
    if sys.argv[1:2] == ["table"]:
        print("| model | total | activated | MTP | published |")
        print("|---|---|---|---|---|")
        for n in CONFIGS:
            t, a, mt, _ = count(n)
            print("| %s | %d (%.2fB) | %d (%.2fB) | %s | %s |" % (
                n, t, t / 1e9, a, a / 1e9, "%d (%.2fB)" % (mt, mt / 1e9) if mt else "—", PUBLISHED[n]))
    elif sys.argv[1:2] == ["check"]:
        name = sys.argv[2]
        t, a, mt, ma = count(name)
        plan = json.load(open(sys.argv[3]))
        mem = plan["memory"] if "memory" in plan else plan
        # the planner's totals hold the MTP depths; HF counts them apart
        pm, pma = mem.get("params_mtp", 0), mem.get("params_mtp_active", 0)
        pt, pa = mem["params_total_unpadded_vocab"] - pm, mem["params_active"] - pma
        c = CONFIGS[name]
        # DeepSeek-V3's e_score_correction_bias [E] per MoE layer is a
        # parameter in HF and a buffer in Megatron and megatrain (updated by
        # the load-balancing rule, not the optimizer): not in the planner's
        # counts
        L, D = c["num_hidden_layers"], c.get("num_nextn_predict_layers", 0)
        bias = [c["n_routed_experts"] if c.get("topk_method") == "noaux_tc" and is_moe(c, l) else 0
                for l in range(L + D)]
        if sum(bias):
            print("%s: less the expert-bias buffers, %d in the decoder, %d in the MTP depths"
                  % (name, sum(bias[:L]), sum(bias[L:])))
        t, a, mt, ma = t - sum(bias[:L]), a - sum(bias[:L]), mt - sum(bias[L:]), ma - sum(bias[L:])
        print("%s: planner total %d activated %d; from the HF config shapes total %d activated %d"
              % (name, pt, pa, t, a))
        ok = (pt, pa) == (t, a)
        if mt or pm:
            # megatrain (as Megatron) shares the embedding and the output
            # layer with the MTP depths; DeepSeek-V3's checkpoint stores a
            # copy of both per depth
            copies = D * 2 * c["vocab_size"] * c["hidden_size"]
            print("%s MTP: planner %d activated %d; from the HF config shapes %d activated %d "
                  "less the %d of the depths' embedding and head copies" % (
                      name, pm, pma, mt, ma, copies))
            ok = ok and (pm, pma) == (mt - copies, ma - copies)
        sys.exit(0 if ok else 1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
