/* tests/support/probe_model.c — the context-parallel ring's analytic
 * workspace and send volumes (checked against the allocator and the CP
 * group's counters by tests/tools/cp_check.c), a weight's global rows, and
 * a MoE layer's last routing (tests/support/probes.h). */
#include "core/dtype.h"
#include "core/util.h"
#include "model/moe_layer_internal.h"
#include "tests/support/probes.h"

/* K and V elements of this rank's chunks: [s/cp, b, ng, 2, hn]. */
static int64_t kv_elems(const mt_cp_layout *L, int b, int ng, int hn) {
  return mt_cp_local_len(L) * b * ng * 2 * hn;
}

size_t mt_cp_attn_workspace_bytes(const mt_cp_layout *L, int b, int np, int ng, int hn,
                                  mt_dtype T) {
  const int64_t kvn = kv_elems(L, b, ng, hn), s2 = mt_cp_local_len(L);
  const int64_t qkvn = s2 * b * (np + 2 * ng) * hn;
  const int64_t es = (int64_t)mt_dtype_size(T);
  int64_t bytes = (5 * kvn + qkvn + L->c * b * np * hn) * es;
  bytes += L->c * b * np * (int64_t)sizeof(float);
  bytes += (s2 * b * ng * 2 + s2 * b * (np + 2 * ng)) * (int64_t)sizeof(int32_t);
  return (size_t)bytes;
}

int64_t mt_cp_attn_fwd_send_elems(const mt_cp_layout *L, int b, int ng, int hn) {
  return (L->cp - 1) * kv_elems(L, b, ng, hn);
}

int64_t mt_cp_attn_bwd_send_elems(const mt_cp_layout *L, int b, int ng, int hn) {
  return (2 * L->cp - 1) * kv_elems(L, b, ng, hn);
}

int64_t mt_param_global_row(const mt_param *p, int64_t r) {
  if (!p->halves) return p->row_offset + r;
  const int64_t half = p->local_rows / 2;
  return r < half ? p->row_offset + r : p->rows / 2 + p->row_offset + (r - half);
}

const mt_moe_routing *mt_moe_acts_routing(const mt_moe_acts *a) { return &a->r; }
