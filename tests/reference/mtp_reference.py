"""Independent PyTorch reference of multi-token prediction (MTP), written from
DeepSeek-V3's technical report §2.2 (arXiv:2412.19437) and Megatron-core's
documented semantics (MultiTokenPredictionLayer, roll_tensor,
process_mtp_loss with calculate_per_token_loss), not from megatrain's C code.
tests/reference/llama_reference.py calls it when the config has
mtp_num_layers; the decoder blocks are that reference's.

For depth k = 1..D (x: input ids [b, s], y: labels [b, s], mask: loss mask):
  x_k = x rolled left by k with zeros entering at the end (torch.roll, then
        the vacated positions set to 0, as Megatron's roll_tensor), likewise
        the position ids (learned position table) and y_k, mask_k;
  e_k = Embedding(x_k) (+ the position table at the rolled positions);
  h_0 = the decoder's output after decoder.final_layernorm;
  h_k = final_layernorm_k(Block_k(eh_proj([enorm(e_k); hnorm(h_{k-1})])))
        (Block_k: a transformer layer of the last decoder layer's kind, named
        mtp.layers.(k-1).mtp_model_layer.*; eh_proj [h, 2h] without bias,
        input features: the normed embedding first, then the normed hidden
        state: torch.cat((decoder_input, hidden_states), -1));
  L_k = sum(mask_k * CE(h_k W_out^T, y_k)) / sum(mask_k), W_out the shared
        output layer.
Objective term: (mtp_loss_scaling_factor / D) * sum_k L_k for one micro-batch
(Megatron's per-token normalisation: each depth's summed loss times
N / N_k, over the N main-loss tokens).
"""
import torch
import torch.nn.functional as F

from llama_reference import attention, mlp, moe, normalize


def roll_left(t, k):
    """t [b, s] rolled left by k, zeros entering at the end."""
    out = torch.zeros_like(t)
    s = t.shape[1]
    if k < s:
        out[:, :s - k] = t[:, k:]
    return out


def block(c, x, P, pre, layer, sdpa=False):
    """One pre-norm transformer layer named pre (global index layer) -> (x, aux)."""
    x = x + attention(c, normalize(c, x, P, pre + "input_layernorm"), P, pre + "self_attention.", sdpa)
    ln2 = normalize(c, x, P, pre + "pre_mlp_layernorm")
    if c.is_moe_any(layer):
        y, aux = moe(c, ln2, P, pre, layer)
    else:
        y, aux = mlp(c, ln2, P, pre + "mlp.", c.ffn), 0.0
    return x + y, aux


def mtp_objective(c, P, x_ids, y_ids, loss_mask, h0, w_out, sdpa=False):
    """-> (lambda/D * sum_k L_k, the MTP layers' MoE auxiliary terms, [L_k])."""
    b, s = x_ids.shape
    mask = loss_mask if loss_mask is not None else torch.ones(b, s, dtype=h0.dtype)
    pos = torch.arange(s)[None].expand(b, s)
    h_prev, total, aux, losses = h0, 0.0, 0.0, []
    for k in range(1, c.mtp + 1):
        pre = "mtp.layers.%d." % (k - 1)
        e = P["embedding.word_embeddings.weight"][roll_left(x_ids, k)]
        if c.pos == "learned_absolute":
            e = e + P["embedding.position_embeddings.weight"][roll_left(pos, k)]
        u = torch.cat((normalize(c, e, P, pre + "enorm"), normalize(c, h_prev, P, pre + "hnorm")), -1)
        u = u @ P[pre + "eh_proj.weight"].T
        x, a = block(c, u, P, pre + "mtp_model_layer.", c.L + k - 1, sdpa)
        aux = aux + a
        h_k = normalize(c, x, P, pre + "final_layernorm")
        logits = (h_k @ w_out.T)[..., :c.V]
        ce = F.cross_entropy(logits.reshape(-1, c.V), roll_left(y_ids, k).reshape(-1), reduction="none")
        m = roll_left(mask, k).reshape(-1).to(ce.dtype)
        L_k = (ce * m).sum() / m.sum().clamp(min=1)
        losses.append(L_k)
        total = total + c.mtp_lambda / c.mtp * L_k
        h_prev = h_k
    return total, aux, losses


def mtp_losses(ref, batch):
    """The per-depth losses [L_k] of a llama_reference.Reference on batch [b, s+1]."""
    from llama_reference import ltor_masks_and_position_ids
    c, P = ref.cfg, ref.params
    x_ids, y_ids = batch[:, :-1], batch[:, 1:]
    loss_mask = None
    if c.eod_mask_loss:
        loss_mask = torch.stack([ltor_masks_and_position_ids(c, row)[1] for row in x_ids])
    x = P["embedding.word_embeddings.weight"][x_ids]
    if c.pos == "learned_absolute":
        x = x + P["embedding.position_embeddings.weight"][torch.arange(x_ids.shape[1])[None]]
    for l in range(c.L):
        x, _ = block(c, x, P, "decoder.layers.%d." % l, l)
    x = normalize(c, x, P, "decoder.final_layernorm")
    w_out = P["output_layer.weight"] if c.untie else P["embedding.word_embeddings.weight"]
    return mtp_objective(c, P, x_ids, y_ids, loss_mask, x, w_out)[2]
