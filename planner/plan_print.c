/* planner/plan_print.c — the output of `megatrain plan` (mt_plan_print,
 * planner/plan.h): one plan as text or as one JSON object; also used for each
 * row of the sweep (plan_sweep.c). */
#include <stdio.h>
#include <string.h>

#include "planner/plan.h"

#define GIB 1073741824.0

static const char *rc_name(int r) { return r == 1 ? "selective" : r == 2 ? "full" : "none"; }

static int query_groups(const mt_model_config *m) {
  return m->group_query_attention ? m->num_query_groups : m->num_attention_heads;
}

/* One line naming the block options (docs/planner.md "Model options"). */
static void print_block(FILE *f, const mt_model_config *m) {
  fprintf(f, "block: ");
  if (!strcmp(m->position_embedding_type, "rope"))
    fprintf(f, "RoPE (base %g, %g%% of channels%s)", m->rotary_base, 100 * m->rotary_percent,
            m->rotary_interleaved ? ", interleaved" : "");
  else if (!strcmp(m->position_embedding_type, "none"))
    fprintf(f, "no position embedding");
  else
    fprintf(f, "learned positions");
  fprintf(f, ", %s, %s, ", m->normalization, m->swiglu ? "SwiGLU" : "GeLU");
  if (m->multi_latent_attention) {
    char q[32] = "none";
    if (m->q_lora_rank > 0) snprintf(q, sizeof q, "%d", m->q_lora_rank);
    fprintf(f, "MLA (q_lora_rank %s, kv_lora_rank %d, qk %d + %d, v %d)%s%s, %s embeddings\n", q,
            m->kv_lora_rank, m->qk_head_dim, m->qk_pos_emb_head_dim, m->v_head_dim,
            m->add_bias_linear ? "" : ", no linear biases",
            m->qk_layernorm ? ", latent norms" : "",
            m->untie_embeddings_and_output_weights ? "untied" : "tied");
    return;
  }
  int ng = query_groups(m);
  if (ng == m->num_attention_heads) fprintf(f, "MHA");
  else if (ng == 1) fprintf(f, "MQA (1 query group)");
  else fprintf(f, "GQA %d query groups", ng);
  fprintf(f, " (kv_channels %d)%s%s, %s embeddings\n", m->kv_channels,
          m->add_bias_linear ? "" : ", no linear biases", m->qk_layernorm ? ", qk_layernorm" : "",
          m->untie_embeddings_and_output_weights ? "untied" : "tied");
}

static void print_json(FILE *f, const mt_config *cfg, const mt_hardware *hw, const mt_plan *p) {
  const mt_model_config *mc = &cfg->model;
  fprintf(f, "{\"config\":\"%s\",\"hardware\":\"%s\",\"world_size\":%d,", cfg->source_path,
          hw->name, p->world);
  fprintf(f,
          "\"model\":{\"position_embedding_type\":\"%s\",\"normalization\":\"%s\","
          "\"swiglu\":%s,\"num_query_groups\":%d,\"kv_channels\":%d,\"add_bias_linear\":%s,"
          "\"qk_layernorm\":%s,\"untie_embeddings_and_output_weights\":%s},",
          mc->position_embedding_type, mc->normalization, mc->swiglu ? "true" : "false",
          query_groups(mc), mc->kv_channels, mc->add_bias_linear ? "true" : "false",
          mc->qk_layernorm ? "true" : "false",
          mc->untie_embeddings_and_output_weights ? "true" : "false");
  fprintf(f,
          "\"layout\":{\"tp\":%d,\"pp\":%d,\"vpp\":%d,\"dp\":%d,\"cp\":%d,\"ep\":%d,"
          "\"etp\":%d,\"sequence_parallel\":%s,\"zero_stage\":%d,\"recompute\":\"%s\","
          "\"recompute_num_layers\":%d,\"micro_batch_size\":%d,\"global_batch_size\":%d,"
          "\"micro_batches\":%d,\"precision\":\"%s\",\"tp_intra_node\":%s,"
          "\"cp_intra_node\":%s,\"dp_intra_node\":%s,\"pp_intra_node\":%s},",
          p->tp, p->pp, p->vpp, p->dp, p->cp, p->ep, p->etp, p->sp ? "true" : "false", p->zero,
          rc_name(p->recompute), p->recompute_num_layers, p->mbs, p->gbs, p->n_micro,
          p->bf16 ? "bf16" : "fp32", p->tp_intra ? "true" : "false",
          p->cp_intra ? "true" : "false", p->dp_intra ? "true" : "false",
          p->pp_intra ? "true" : "false");
  const mt_plan_memory *m = &p->mem;
  fprintf(f, "\"memory\":{\"worst_stage\":%d,\"bytes\":{", m->worst_stage);
  for (int i = 0; i < MT_PM_N; i++)
    fprintf(f, "%s\"%s\":%.0f", i ? "," : "", mt_plan_mem_name(i), m->bytes[i]);
  fprintf(f,
          "},\"total\":%.0f,\"capacity\":%.0f,\"fits\":%s,\"activation_bytes_per_layer\":%.0f,"
          "\"inflight_layer_microbatches\":%.6g,\"params_per_rank\":%lld,\"params_total\":%lld,"
          "\"params_total_unpadded_vocab\":%lld,\"params_active\":%lld,\"params_mtp\":%lld,"
          "\"params_mtp_active\":%lld,",
          m->total, m->capacity, m->fits ? "true" : "false", m->act_layer_bytes,
          m->inflight_layers, (long long)m->params_per_rank, (long long)m->params_total,
          (long long)m->params_total_unpadded, (long long)m->params_active,
          (long long)m->params_mtp, (long long)m->params_mtp_active);
  if (cfg->model.num_experts > 0) /* the MoE buffers' rows (docs/planner.md "MoE") */
    fprintf(f, "\"moe_rows\":{\"received\":%.0f,\"experts\":%.0f,\"worst_case\":%.0f,"
            "\"load_factor\":%.6g,\"total_worst_case\":%.0f,\"fits_worst_case\":%s},",
            m->moe_recv_rows, m->moe_expert_rows, m->moe_worst_rows, m->moe_load_factor,
            m->total_worst, m->total_worst <= m->capacity ? "true" : "false");
  /* every stage (all ranks of a stage have the same sizes) */
  fprintf(f, "\"per_stage\":[");
  for (int k = 0; k < p->pp && k < 1024; k++) {
    double b[MT_PM_N], tot = 0;
    mt_plan_memory_stage(cfg, p->world, &p->opt, k, b);
    fprintf(f, "%s{\"stage\":%d,\"bytes\":{", k ? "," : "", k);
    for (int i = 0; i < MT_PM_N; i++) {
      fprintf(f, "%s\"%s\":%.0f", i ? "," : "", mt_plan_mem_name(i), b[i]);
      tot += b[i];
    }
    fprintf(f, "},\"total\":%.0f}", tot);
  }
  fprintf(f, "]},");
  if (cfg->model.num_experts > 0) {
    const mt_plan_moe_comm *q = &p->moe;
    fprintf(f,
            "\"moe\":{\"edp\":%d,\"ep_ranks_per_node\":%d,\"etp_intra_node\":%s,"
            "\"edp_intra_node\":%s,\"per_layer_microbatch\":{\"a2a_bytes\":%.0f,\"a2a_s\":%.6g,"
            "\"etp_bytes\":%.0f,\"etp_s\":%.6g,\"shared_tp_bytes\":%.0f,\"shared_tp_s\":%.6g}},",
            q->edp, q->ep_per_node, q->etp_intra ? "true" : "false",
            q->edp_intra ? "true" : "false", q->a2a_bytes, q->a2a_s, q->etp_bytes, q->etp_s,
            q->shared_tp_bytes, q->shared_tp_s);
  }
  const mt_plan_time *t = &p->time;
  if (p->fp8.on) {
    const mt_plan_fp8_info *q = &p->fp8;
    const mt_training_config *tc = &cfg->training;
    fprintf(f,
            "\"fp8\":{\"format\":\"%s\",\"recipe\":\"%s\",\"wgrad\":%s,\"param_gather\":%s,"
            "\"peak_tflops\":%.6g,\"fp8_layers\":%d,\"bf16_layers\":%d,\"gemm_s\":%.6g,"
            "\"quantize_s\":%.6g,\"quantize_bytes\":%.0f,\"weights_per_rank\":%.0f,"
            "\"weight_tensors_per_rank\":%.0f,\"dp_gather_bytes\":%.0f},",
            tc->fp8_format, tc->fp8_recipe, tc->fp8_wgrad ? "true" : "false",
            tc->fp8_param_gather ? "true" : "false", q->peak_tflops, q->fp8_layers,
            q->bf16_layers, q->gemm_s, q->quant_s, q->quant_bytes, q->weights, q->tensors,
            t->dp_gather_bytes);
  }
  fprintf(f, "\"time\":{\"iteration_s\":%.6g,\"breakdown_s\":{", t->t_iter);
  for (int i = 0; i < MT_PT_N; i++)
    fprintf(f, "%s\"%s\":%.6g", i ? "," : "", mt_plan_time_name(i), t->comp[i]);
  fprintf(f,
          "},\"compute_s\":%.6g,\"communication_s\":%.6g,\"exposed_communication_s\":%.6g,"
          "\"flops_formula\":\"%s\",\"model_flops\":%.17g,\"hardware_flops\":%.17g,"
          "\"tflops_per_gpu\":%.6g,"
          "\"hw_tflops_per_gpu\":%.6g,\"mfu\":%.6g,\"hfu\":%.6g,\"tokens_per_s\":%.6g,"
          "\"bubble_fraction\":%.6g,\"cp_ring_per_layer\":{\"fwd_bytes\":%.0f,\"bwd_bytes\":%.0f,"
          "\"transfer_s\":%.6g,\"block_s\":%.6g,\"exposed_fwd_s\":%.6g,\"exposed_bwd_s\":%.6g}}}\n",
          mt_plan_compute_s(t), mt_plan_comm_total(t), mt_plan_comm_exposed(t),
          cfg->logging.flops_formula, t->model_flops, t->hw_flops, t->tflops_per_gpu, t->hw_tflops_per_gpu, t->mfu, t->hfu,
          t->tokens_per_s, t->bubble_fraction, t->cp_ring.fwd_bytes, t->cp_ring.bwd_bytes,
          t->cp_ring.transfer_s, t->cp_ring.block_s, t->cp_ring.exposed_fwd_s,
          t->cp_ring.exposed_bwd_s);
}

void mt_plan_print(FILE *f, const mt_config *cfg, const mt_hardware *hw, const mt_plan *p,
                   int json) {
  if (json) {
    print_json(f, cfg, hw, p);
    return;
  }
  const mt_plan_memory *m = &p->mem;
  const mt_plan_time *t = &p->time;
  fprintf(f, "megatrain plan: %s on %d x %s (%d GPUs per node)\n", cfg->source_path, p->world,
          hw->name, hw->gpus_per_node);
  fprintf(f, "model: %d layers, hidden %d, %d heads, ffn %d, seq %d, padded vocab %lld, "
          "%.3fB parameters\n", cfg->model.num_layers, cfg->model.hidden_size,
          cfg->model.num_attention_heads, cfg->model.ffn_hidden_size, cfg->model.seq_length,
          (long long)mt_config_padded_vocab(cfg), m->params_total / 1e9);
  print_block(f, &cfg->model);
  fprintf(f, "parameters: %lld (%lld with the unpadded vocabulary %d", (long long)m->params_total,
          (long long)m->params_total_unpadded, cfg->model.vocab_size);
  if (cfg->model.num_experts > 0)
    fprintf(f, "; %lld activated per token", (long long)m->params_active);
  if (m->params_mtp > 0)
    fprintf(f, "; of these the MTP depths %lld, %lld activated", (long long)m->params_mtp,
            (long long)m->params_mtp_active);
  fprintf(f, ")\n");
  fprintf(f, "layout: tp %d%s, pp %d (v %d)%s, dp %d%s, ", p->tp,
          p->tp > 1 ? (p->tp_intra ? " intra-node" : " inter-node") : "", p->pp, p->vpp,
          p->pp > 1 ? (p->pp_intra ? " intra-node" : " inter-node") : "", p->dp,
          p->dp > 1 && p->cp == 1 ? (p->dp_intra ? " intra-node" : " inter-node") : "");
  if (p->cp > 1) /* gradients over dp x cp */
    fprintf(f, "cp %d%s (%s; gradients over dp x cp = %d%s), ", p->cp,
            p->cp_intra ? " intra-node" : " inter-node", cfg->parallel.cp_comm_type,
            p->dp * p->cp, p->dp_intra ? " intra-node" : " inter-node");
  if (cfg->model.num_experts > 0)
    fprintf(f, "ep %d (%d per node), etp %d%s, edp %d%s", p->ep, p->moe.ep_per_node, p->etp,
            p->etp > 1 ? (p->moe.etp_intra ? " intra-node" : " inter-node") : "", p->moe.edp,
            p->moe.edp > 1 ? (p->moe.edp_intra ? " intra-node" : " inter-node") : "");
  else
    fprintf(f, "ep %d", p->ep);
  fprintf(f, " | sequence parallel %s | zero %d "
          "| recompute %s | micro-batch %d, global %d (%d micro-batches) | %s\n",
          p->sp ? "on" : "off", p->zero, rc_name(p->recompute), p->mbs, p->gbs, p->n_micro,
          p->bf16 ? "bf16 (fp32 master, fp32 grads)" : "fp32");
  fprintf(f, "\nmemory per rank (worst rank: pipeline stage %d), GiB\n", m->worst_stage);
  for (int i = 0; i < MT_PM_N; i++)
    fprintf(f, "  %-15s %10.2f\n", mt_plan_mem_name(i), m->bytes[i] / GIB);
  fprintf(f, "  %-15s %10.2f  of %.2f available -> %s\n", "total", m->total / GIB,
          m->capacity / GIB, m->fits ? "fits" : "DOES NOT FIT");
  fprintf(f, "  (activations: %.1f MiB per layer per micro-batch, %.4g layer-micro-batches "
          "in flight)\n", m->act_layer_bytes / 1048576.0, m->inflight_layers);
  if (cfg->model.num_experts > 0) {
    fprintf(f, "  MoE buffers: %.0f rows received, %.0f in the experts per rank (", m->moe_recv_rows,
            m->moe_expert_rows);
    if (cfg->model.moe_pad_expert_input_to_capacity)
      fprintf(f, "padded to capacity: E x C, fixed)\n");
    else if (m->moe_load_factor > 0)
      fprintf(f, "balanced routing x load factor %.3g, --moe-load-factor)\n", m->moe_load_factor);
    else
      fprintf(f, "given by --moe-recv-rows)\n");
    if (!cfg->model.moe_pad_expert_input_to_capacity)
      fprintf(f, "  worst case if all tokens route to one rank: %.0f rows received, total %.2f GiB "
              "-> %s\n", m->moe_worst_rows, m->total_worst / GIB,
              m->total_worst <= m->capacity ? "fits" : "DOES NOT FIT");
  }
  fprintf(f, "\ntime per iteration: %.4g s\n", t->t_iter);
  fprintf(f, "  %-16s %10s %7s\n", "component", "seconds", "share");
  for (int i = 0; i < MT_PT_N; i++)
    if (t->comp[i] > 0)
      fprintf(f, "  %-16s %10.4g %6.1f%%\n", mt_plan_time_name(i), t->comp[i],
              100 * t->comp[i] / t->t_iter);
  {
    /* compute, communication (all of it) and its exposed part per step */
    static const int kinds[] = {MT_PT_TP_COMM, MT_PT_CP_COMM, MT_PT_EP_COMM, MT_PT_PP_COMM,
                                MT_PT_DP_COMM};
    const double comp = mt_plan_compute_s(t), tot = mt_plan_comm_total(t),
                 exp_s = mt_plan_comm_exposed(t);
    fprintf(f, "  per step: compute %.4g s | communication %.4g s total, %.4g s exposed", comp,
            tot, exp_s);
    if (tot > 0) {
      const double hid = 100 * (1 - exp_s / tot);
      fprintf(f, " (%.0f%% hidden)\n", hid > 0.5 ? hid : 0.0); /* no "-0%" */
    } else {
      fprintf(f, " (no communication)\n");
    }
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
      if (t->comm_total[kinds[k]] > 0)
        fprintf(f, "    %-8s total %10.4g s  exposed %10.4g s\n", mt_plan_time_name(kinds[k]),
                t->comm_total[kinds[k]], t->comp[kinds[k]]);
  }
  if (p->cp > 1) {
    const mt_plan_cp_ring *r = &t->cp_ring;
    fprintf(f, "  context-parallel ring per layer and micro-batch: sends %.3g MiB forward, %.3g "
            "MiB backward; transfers %.3g ms vs %.3g ms per block -> %.3g ms exposed (%.0f%% "
            "hidden)\n", r->fwd_bytes / 1048576.0, r->bwd_bytes / 1048576.0, 1e3 * r->transfer_s,
            1e3 * r->block_s, 1e3 * (r->exposed_fwd_s + r->exposed_bwd_s),
            r->transfer_s > 0 ? 100 * (1 - (r->exposed_fwd_s + r->exposed_bwd_s) / r->transfer_s)
                              : 100.0);
  }
  if (cfg->model.num_experts > 0) {
    const mt_plan_moe_comm *q = &p->moe;
    fprintf(f, "  MoE per layer and micro-batch (fwd + bwd): EP all-to-all %.3g MiB sent (%.3g ms)",
            q->a2a_bytes / 1048576.0, 1e3 * q->a2a_s);
    if (p->etp > 1)
      fprintf(f, ", ETP gather/scatter %.3g MiB (%.3g ms)", q->etp_bytes / 1048576.0,
              1e3 * q->etp_s);
    if (q->shared_tp_bytes > 0)
      fprintf(f, ", shared expert TP %.3g MiB (%.3g ms)", q->shared_tp_bytes / 1048576.0,
              1e3 * q->shared_tp_s);
    fprintf(f, "\n");
  }
  if (p->fp8.on) {
    const mt_plan_fp8_info *q = &p->fp8;
    const mt_training_config *tc = &cfg->training;
    fprintf(f, "  fp8 (%s, %s): the linears of %d of %d layers at the FP8 peak %.0f TFLOP/s "
            "(fprop, dgrad%s), their GEMMs %.4g s; quantization %.4g s (%.3g GiB moved, in "
            "elementwise)\n", tc->fp8_format, tc->fp8_recipe, q->fp8_layers,
            q->fp8_layers + q->bf16_layers, q->peak_tflops, tc->fp8_wgrad ? ", wgrad" : "; wgrad bf16",
            q->gemm_s, q->quant_s, q->quant_bytes / GIB);
    if (t->dp_gather_bytes > 0)
      fprintf(f, "  parameter all-gather: %.4g GiB per iteration%s (%.0f FP8 weights in %.0f "
              "tensors on the rank)\n", t->dp_gather_bytes / GIB,
              tc->fp8_param_gather ? ", FP8 weights as 1 byte + a 4-byte scale per tensor"
                                   : ", bf16 (fp8_param_gather off)",
              q->weights, q->tensors);
  }
  fprintf(f, "\nthroughput: %.1f TFLOP/s per GPU (model FLOPs, %s formula; %.1f with "
          "recomputation), MFU %.1f%%, HFU %.1f%%, %.4g tokens/s\n", t->tflops_per_gpu,
          cfg->logging.flops_formula, t->hw_tflops_per_gpu,
          100 * t->mfu, 100 * t->hfu, t->tokens_per_s);
}

