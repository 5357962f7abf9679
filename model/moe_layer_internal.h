/* model/moe_layer_internal.h — the activations one MoE layer keeps from its
 * forward for its backward (model/moe_layer.c; tests read the routing
 * through tests/support/probes.h). */
#ifndef MT_MOE_LAYER_INTERNAL_H
#define MT_MOE_LAYER_INTERNAL_H

#include "model/moe_etp.h"
#include "model/moe_experts.h"
#include "model/moe_layer.h"
#include "model/moe_router.h"
#include "model/moe_token_dispatcher.h"

struct mt_moe_acts {
  mt_moe_routing r;
  mt_moe_dispatch_state d;
  mt_moe_experts_acts e;
  mt_moe_etp_state t;                /* etp > 1 only */
};

#endif
