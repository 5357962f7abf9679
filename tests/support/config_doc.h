/* tests/support/config_doc.h — docs/config.md generated from the key table
 * (config/config_table.c) and the rule table (config/config_check.c,
 * config_rules_model.c, config_rules_data.c, config_rules_train.c): `make
 * docs` runs build/tests/tools/gen_config_doc,
 * which calls mt_config_doc_render on docs/config.md.in. */
#ifndef MT_CONFIG_CONFIG_DOC_H
#define MT_CONFIG_CONFIG_DOC_H

#include <stddef.h>
#include <stdio.h>

/* Marker line of the template replaced by one section's table; SECTION is a
 * section name or "top" for the top-level keys. */
#define MT_CONFIG_DOC_MARKER "<!-- config-keys: "
/* Marker lines replaced by the consistency rules (a numbered list, in the
 * order they are checked) and by the table of keys that need another
 * setting. */
#define MT_CONFIG_DOC_RULES "<!-- config-rules -->"
#define MT_CONFIG_DOC_NEEDS "<!-- config-needs -->"

/* Write the reference page to `out`: a "generated" notice, then the template
 * text `tmpl` (NUL-terminated markdown) line by line, each marker line
 * "<!-- config-keys: SECTION -->" replaced by the markdown table of that
 * section's keys (key | type | default | range | Megatron flag |
 * description, with the setting it needs), in table order, the line
 * MT_CONFIG_DOC_RULES by the consistency rules and MT_CONFIG_DOC_NEEDS by
 * the keys that need another setting. Returns 0, or 1 with a message in err
 * when a marker names an unknown section, a section or rule marker is
 * missing or given twice, or a table string contains a '|' that would break
 * the markdown table. Host-only; nothing is written to `out` on error. */
int mt_config_doc_render(const char *tmpl, FILE *out, char *err, size_t errlen);

#endif
