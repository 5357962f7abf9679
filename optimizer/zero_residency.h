/* optimizer/zero_residency.h — the ZeRO-2/3 residency policy: which
 * gathered parameter and gradient working buffers of the distributed
 * optimizer live before and after each forward/backward step. Carried out by
 * optimizer/distrib_optimizer.c, counted by the planner (planner/plan_stage.c).
 * ZeRO: Rajbhandari et al. 2020, sec. 5 (P_g, P_p). */
#ifndef MT_OPTIMIZER_ZERO_RESIDENCY_H
#define MT_OPTIMIZER_ZERO_RESIDENCY_H

/* One micro-batch is the sequence of 2S steps over the S segments (segment
 * 0 = embedding, 1..S-2 = layers, S-1 = head; pipeline stages do not use
 * stages 2/3):
 *   F(0) F(1) ... F(S-1) B(S-1) ... B(1) B(0)
 * step x < S is F(x), step 2S-1-x is B(x). Step i needs the parameters of
 * its segment, the head also those of segment 0 when the output layer is
 * tied to the word embedding, and B(0) none (the embedding backward only
 * scatters gradients). B(x) writes the gradients of segment x (B(S-1) also
 * of segment 0 when tied); a segment's gradients are complete after the
 * last step that writes them, B(x).
 *
 * Stage 3, before step i: free gathered segments that steps i .. i+prefetch
 * do not need and no begun-but-unended step uses, then gather the missing
 * ones in step order (the next `prefetch` steps' segments are gathered
 * before step i computes: "prefetch" means gathered early; a blocking engine
 * does not overlap). After step i: free what steps i+1 .. i+max(1,prefetch)
 * do not need (so the head, used by F(S-1) and B(S-1) back to back, is
 * gathered once for both). Stages 2/3, before a backward step: allocate
 * zeroed gradient working buffers for the segments it writes; after it:
 * reduce-scatter the segments whose gradients are now complete and free
 * them. Steps may nest (full recomputation begins the backward steps of a
 * chunk of layers before any of them ends): a segment stays while a step
 * that needs it is open.
 *
 * The policy is pure bookkeeping (no allocation after init, no
 * communication, no backend): the trainer's hooks (optimizer/distrib_optimizer.c)
 * carry the actions out and the planner (planner/plan_stage.c) counts their
 * bytes, so both follow the same decisions. */
typedef enum {
  MT_ZERO_FREE_PARAMS = 0, /* release segment's gathered parameters */
  MT_ZERO_GATHER_PARAMS,   /* all-gather segment's parameters (mt_zero_allgather_segment) */
  MT_ZERO_ALLOC_GRADS,     /* allocate segment's zeroed gradient working buffer */
  MT_ZERO_REDUCE_GRADS     /* reduce-scatter (mt_zero_reduce_scatter_segment), then free */
} mt_zero_action_kind;

typedef struct {
  mt_zero_action_kind kind;
  int seg;
} mt_zero_action;

typedef struct {
  int n_seg, stage, prefetch, tied;
  unsigned char *param; /* [n_seg] parameters gathered (stage 3) */
  unsigned char *grad;  /* [n_seg] gradient working buffer allocated */
  unsigned char *want;  /* [n_seg] scratch */
  int *nopen;           /* [n_seg] steps begun but not ended that need its parameters */
  mt_zero_action *act;  /* the last decision: act[0 .. n_act) in order */
  int n_act;
} mt_zero_residency;

/* Start with nothing resident: n_seg segments (S above), stage 2 or 3,
 * prefetch steps gathered ahead (stage 3), tied 1 when the head also needs
 * segment 0. Fatal on other stages. Free with mt_zero_residency_free. */
void mt_zero_residency_init(mt_zero_residency *R, int n_seg, int stage, int prefetch, int tied);
void mt_zero_residency_free(mt_zero_residency *R);

/* The decision at the start (after == 0) or the end (after == 1) of step i
 * (0 <= i < 2 n_seg): fills R->act[0 .. n_act) with the actions to carry out
 * in that order, updates the resident/open state as if they were done, and
 * returns n_act. */
int mt_zero_residency_step(mt_zero_residency *R, int i, int after);

/* Release every gathered parameter segment (end of a forward-only pass or
 * of the run): R->act receives one MT_ZERO_FREE_PARAMS per gathered segment
 * in segment order, open-step counts are reset; returns n_act. Gradient
 * working buffers are not touched. */
int mt_zero_residency_release_all(mt_zero_residency *R);

#endif
