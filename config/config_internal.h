/* config/config_internal.h — private to the config/ sources: the key table
 * (config_table.c: one row per config key holding section, name, type, where
 * it lives in mt_config, flags, range, default, the Megatron flag it mirrors
 * and a one-line description) and the validation context shared by the
 * loader (config.c), the checks (config_check.c), the canonical JSON writer
 * (config_keys.c) and the docs/config.md generator (tests/support/config_doc.c). */
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
  MT_CT_LAYER_FREQ /* model.moe_layer_freq: int, or a list of 0/1 per layer */
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
} mt_cfg_key;

enum { MT_CFG_NSECTIONS = 7, MT_CFG_MAX_KEYS = 160 };

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
} mt_cfg_ctx;

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

/* Fill the derived keys that are 0 (absent, null or 0) from the others, for
 * world_size ranks (< 1 is taken as 1). */
void mt_cfg_derive(mt_config *cfg, int world_size);

/* Fill derived defaults, check ranges and cross-key consistency given
 * world_size ranks. Returns 0 or 2 (message in c). */
int mt_cfg_check(mt_cfg_ctx *c, mt_config *cfg, int world_size);
/* Parts of mt_cfg_check (config_check_train.c): the optimizer schedule keys
 * (resolves nothing; 2 with a message on a bad combination) and the data
 * paths (data_path or train/valid/test_data_path). */
int mt_cfg_check_schedule(mt_cfg_ctx *c, mt_config *cfg);
int mt_cfg_check_data_paths(mt_cfg_ctx *c, const mt_config *cfg);

/* Canonical JSON tree of a resolved config (all keys, table order). */
cJSON *mt_cfg_to_json(const mt_config *cfg);

#endif
