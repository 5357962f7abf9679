/* config/config_internal.h — private to the config/ sources: the key table
 * (config_table.c: one row per config key holding section, name, type, where
 * it lives in mt_config, flags, range, default, the Megatron flag it mirrors,
 * a one-line description and the setting it needs to have an effect), the
 * table of consistency rules (config_check.c, config_rules_model.c,
 * config_rules_data.c, config_rules_train.c: each rule's check, its text in
 * docs/config.md and a config that breaks it) and the validation context
 * shared by the loader (config.c), the checks, the rule on keys without
 * effect (config_needs.c), the messages (config_msg.c), the canonical JSON writer (config_keys.c) and
 * the docs/config.md generator (tests/support/config_doc.c). Inside the
 * folder the files call down only: config.c -> config_check.c ->
 * config_rules_model.c / config_rules_data.c / config_rules_train.c /
 * config_needs.c -> config_msg.c, config_table.c (make check-layers). */
#ifndef MT_CONFIG_CONFIG_INTERNAL_H
#define MT_CONFIG_CONFIG_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "config/config.h"

typedef enum {
  MT_CT_INT,   /* int, integral JSON number in int range */
  MT_CT_I64,   /* int64_t, integral JSON number, |v| <= 2^53 */
  MT_CT_U64,   /* uint64_t, integral JSON number >= 0 */
  MT_CT_FLOAT, /* float, finite JSON number */
  MT_CT_BOOL,  /* int 0/1, JSON true/false */
  MT_CT_STR,   /* char[size], JSON string */
  MT_CT_PATHS, /* data.data_path: string, list, or weighted list */
  MT_CT_LAYER_FREQ, /* model.moe_layer_freq: int, or a list of 0/1 per layer */
  MT_CT_I64x3      /* int64_t[3], a list of three integers; null: all 0 (first 0 = off) */
} mt_cfg_type;

enum {
  MT_CK_REQUIRED = 1u << 0, /* must be given */
  MT_CK_NULLABLE = 1u << 1, /* null accepted: "" for strings, 0 for numbers */
  MT_CK_DERIVED = 1u << 2,  /* absent, null or 0 = derived from other keys */
  MT_CK_GE = 1u << 3,       /* value >= lo */
  MT_CK_GT = 1u << 4,       /* value > lo */
  MT_CK_LE = 1u << 5,       /* value <= hi */
  MT_CK_LT = 1u << 6        /* value < hi */
};

typedef struct {
  int sec;              /* index into mt_cfg_sections (0 = top level) */
  const char *name;     /* JSON key */
  mt_cfg_type type;
  size_t off;           /* offset in mt_config */
  size_t size;          /* bytes of the field (string capacity) */
  unsigned flags;       /* MT_CK_* */
  double lo, hi;        /* range bounds used by the MT_CK_GE/GT/LE/LT flags */
  const char *choices;  /* "a|b|c" for enumerated strings, else NULL */
  double def;           /* default of a number or bool key (0 for derived keys) */
  const char *def_str;  /* default of a string key (NULL = ""); for a derived key
                           the rule, as docs/config.md shows it */
  const char *megatron; /* the Megatron-LM (or DeepSpeed) option it mirrors, markdown */
  const char *doc;      /* one-line description, markdown */
  const char *needs;    /* NULL, or the setting without which the key has no effect:
                           "section.key" (true / non-zero / non-empty), "section.key=V",
                           "section.key!=V" or "section.key>N" (a path list: set, or
                           "=null" for not set); the key named may need another in
                           turn (config_needs.c) */
} mt_cfg_key;

enum { MT_CFG_NSECTIONS = 7, MT_CFG_MAX_KEYS = 256 };

extern const char *const mt_cfg_sections[MT_CFG_NSECTIONS];
extern const mt_cfg_key mt_cfg_keys[];
extern const int mt_cfg_nkeys;

/* Validation state of one load: where messages go and which keys were seen. */
typedef struct {
  const char *src;  /* file name used in messages */
  char *err;
  size_t errlen;
  int failed;       /* first message already written */
  unsigned char present[MT_CFG_MAX_KEYS];    /* 1: key given, 2: given as null */
  unsigned char overridden[MT_CFG_MAX_KEYS]; /* key came from --set */
  char notes[512];  /* notes collected for mt_config.notes */
  int saved;        /* the text is a config megatrain wrote: its keys without effect are
                       dropped (reset to the default), not refused */
  int kv_given, ffn_given; /* model.kv_channels / ffn_hidden_size given non-zero */
  int rule;         /* index of the rule whose check failed or noted last, -1: none */
} mt_cfg_ctx;

/* ---- keys that need another setting (config_needs.c) ---- */

/* 1 when key k has an effect under cfg: its `needs` holds, and so does the
 * `needs` of the key named there, and so on. Else 0 and *blocker (may be
 * NULL) = the key whose setting is missing (the first one up the chain whose
 * condition fails is named by the condition: its key). Keys without `needs`
 * apply. */
int mt_cfg_applies(const mt_config *cfg, int k, int *blocker);
/* The rule: a key given (present == 1) that does not apply is refused,
 * naming it, the key that would enable it and its value. Returns 0 or 2. */
int mt_cfg_check_needs(mt_cfg_ctx *c, mt_config *cfg, int world);
/* With c->saved: keys of the text (not from --set) that do not apply are
 * reset to their default and marked absent (a config written by an older
 * build lists every key). */
void mt_cfg_drop_dead(mt_cfg_ctx *c, mt_config *cfg);
/* One `needs` condition: the key it names, the operator (0: true /
 * non-zero / non-empty, '=', '!' for "!=", '>') and the operand text. */
typedef struct {
  int key;
  char op;
  char val[64];
} mt_cfg_need;
/* Parse key k's `needs` into *c: 0, or -1 when k has none or it does not
 * parse (the unit test checks every row). */
int mt_cfg_need_of(int k, mt_cfg_need *c);
/* What c asks for: md 0 for messages ("model.num_experts > 0",
 * "model.position_embedding_type \"rope\""), 1 for docs/config.md
 * ("`model.num_experts` > 0"). */
void mt_cfg_need_text(const mt_cfg_need *c, int md, char *buf, size_t n);

/* ---- consistency rules ---- */

typedef struct {
  const char *keys;    /* the key(s) its message names, "section.key", space-separated */
  int (*check)(mt_cfg_ctx *c, mt_config *cfg, int world); /* 0, or 2 with the message */
  const char *doc;     /* the rule as docs/config.md states it, markdown */
  const char *example; /* a config that breaks it: "WORLD: section.key=value; ..." as --set
                          on MT_CFG_RULE_BASE (tests/unit/config/test_config_rules.c) */
  int note;            /* 1: the rule adjusts the config and adds a note instead of failing */
  int before_ranges;   /* 1: checked before the per-key ranges */
} mt_cfg_rule;

/* The config every rule's example applies its --set list to. */
#define MT_CFG_RULE_BASE                                                                    \
  "{\"model\": {\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, "        \
  "\"seq_length\": 32}, \"training\": {\"micro_batch_size\": 2, \"train_iters\": 10, "       \
  "\"lr\": 1e-3}, \"data\": {\"data_path\": \"x\"}}"

/* All rules, in the order they are checked (groups of config_check.c,
 * config_rules_model.c, config_rules_data.c, config_rules_train.c, config_rules_fp8.c); *n =
 * how many. */
const mt_cfg_rule *mt_cfg_rule_at(int i);
int mt_cfg_nrules(void);
/* dp = world / (tp × pp × cp) when that divides the world and all are ≥ 1, else 0. */
static inline int mt_cfg_data_parallel(const mt_config *cfg, int world) {
  const mt_parallel_config *p = &cfg->parallel;
  if (p->tensor_model_parallel_size < 1 || p->pipeline_model_parallel_size < 1 ||
      p->context_parallel_size < 1)
    return 0;
  const long long mp = (long long)p->tensor_model_parallel_size *
                       p->pipeline_model_parallel_size * p->context_parallel_size;
  return world % mp == 0 ? (int)(world / mp) : 0;
}
const mt_cfg_rule *mt_cfg_rules_layout(int *n);
const mt_cfg_rule *mt_cfg_rules_model(int *n);
const mt_cfg_rule *mt_cfg_rules_data(int *n);
const mt_cfg_rule *mt_cfg_rules_train(int *n);
const mt_cfg_rule *mt_cfg_rules_fp8(int *n);
const mt_cfg_rule *mt_cfg_rules_mtp(int *n); /* config_rules_mtp.c */

/* Note `msg` (collected into mt_config.notes). */
void mt_cfg_note(mt_cfg_ctx *c, const char *msg);

/* The whole load into the context (mt_config_load_string runs this; the
 * unit tests read c->rule): parse, overrides, walk, checks, canonical JSON.
 * Returns 0 or 2. */
int mt_cfg_load_ctx(mt_cfg_ctx *c, mt_config *cfg, const char *json,
                    const char *const *overrides, int n_overrides, int world_size);

/* Index of key `name` in section `sec`, or -1. */
int mt_cfg_find_key(int sec, const char *name);
/* Index of key `name`, as "section.key" or "key" for the top level, or -1. */
int mt_cfg_find_dotted(const char *dotted);

/* Write "<src>: <section>.<key>[ (from --set)]: <message>" into the context
 * (only the first message is kept). Returns 2, the exit status. */
int mt_cfg_fail(mt_cfg_ctx *c, int key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Same with a free-form label instead of a key ("model", "--set x"). */
int mt_cfg_fail_label(mt_cfg_ctx *c, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Pointer to the field of key k inside cfg. */
void *mt_cfg_field(mt_config *cfg, int k);
const void *mt_cfg_cfield(const mt_config *cfg, int k);

/* Write every key's default from the table into cfg (all other bytes 0);
 * derived keys stay 0 (= derive). */
void mt_cfg_apply_defaults(mt_config *cfg);
/* The same for key k alone. */
void mt_cfg_apply_default(mt_config *cfg, int k);

/* Fill the derived keys that are 0 (absent, null or 0) from the others, for
 * world_size ranks (< 1 is taken as 1). */
void mt_cfg_derive(mt_config *cfg, int world_size);

/* Fill derived defaults, check ranges and cross-key consistency given
 * world_size ranks. Returns 0 or 2 (message in c). */
int mt_cfg_check(mt_cfg_ctx *c, mt_config *cfg, int world_size);

/* Canonical JSON tree of a resolved config (every key that applies, table
 * order: a key without effect is left out, so the text loads again). */
cJSON *mt_cfg_to_json(const mt_config *cfg);

#endif
