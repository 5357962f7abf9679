/* tests/unit/config_fixtures.h — configs shared by the config unit tests
 * (test_config.c, test_config_model.c). */
#ifndef MT_TESTS_CONFIG_FIXTURES_H
#define MT_TESTS_CONFIG_FIXTURES_H

/* Smallest valid config: only the required keys (+ micro_batch_size 2). */
static const char *MINIMAL =
    "{\"model\": {\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, "
    "\"seq_length\": 32},\n"
    " \"training\": {\"train_iters\": 10, \"lr\": 0.1, \"micro_batch_size\": 2},\n"
    " \"data\": {\"data_path\": \"prefix\"}}\n";

static const char *SRC = "configs/x.json";

#endif
