/* JSON model files: round trips of hand-built models with every layer kind,
 * of floats bit for bit and of every zoo model; the hand-written example
 * tests/models/tiny-inception.json; every file in tests/models/bad/ failing
 * with the status and message in the table below (and no file without an
 * entry); errors that need no file; and damaged copies of a good file,
 * which must fail cleanly, never crash or leak (run under valgrind). */
#include <dirent.h>
#include <float.h>
#include <locale.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#ifndef BRG_TEST_SRCDIR
#define BRG_TEST_SRCDIR "."
#endif
#ifndef BRG_TEST_BUILDDIR
#define BRG_TEST_BUILDDIR "."
#endif

#define MODELS_DIR BRG_TEST_SRCDIR "/models"
#define BAD_DIR MODELS_DIR "/bad"

static char tmpdir[1024];

/* ---- helpers ------------------------------------------------------------ */

/* The whole file at path, NUL-terminated (length in *n), or NULL. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) {
            char *p = realloc(buf, cap *= 2);
            if (!p) {
                free(buf);
                buf = NULL;
            }
            buf = p;
        }
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    *n = len;
    return buf;
}

/* Write m to text, read the text back and check the result equals m; then
 * write the copy and check the text is the same (the writer is a fixed
 * point). Returns the text (caller frees) or NULL. */
static char *round_trip(const brg_model *m, const char *what)
{
    char *text = NULL, *again = NULL, why[256] = "";
    brg_model *copy = NULL;
    CHECK_OK(brg_model_to_json(m, &text));
    if (!text) return NULL;
    CHECK_OK(brg_model_parse_json(text, strlen(text), what, &copy));
    if (copy) {
        CHECK_MSG(brg_model_equal(m, copy, why, sizeof why), "%s: read back differs: %s", what, why);
        CHECK_OK(brg_model_to_json(copy, &again));
        CHECK_MSG(again && strcmp(text, again) == 0, "%s: writing the copy gives other text", what);
    }
    free(again);
    brg_model_destroy(copy);
    return text;
}

static brg_layer_desc desc_of(brg_layer_kind kind) { return brg_layer_desc_init(kind); }

/* ---- every layer kind ----------------------------------------------------- */

/* A model using every kind, asymmetric windows, non-default parameters, a
 * layer whose output is named apart from the layer, a skip two blocks back
 * and a concat of three branches. */
static brg_model *build_all_kinds(void)
{
    brg_model *m = NULL;
    brg_status st = brg_model_create("all-kinds", 3, 20, 24, &m);
    if (st != BRG_OK) return NULL;
    brg_layer_desc d;
    const char *cat_in[3] = {"branch_conv", "branch_avg", "pool_max"};
    st = BRG_OK;
#define ADD(call)                                                                                  \
    do {                                                                                           \
        if (st == BRG_OK) st = (call);                                                             \
    } while (0)
    ADD(brg_model_begin_block(m, "stem"));
    ADD(brg_model_add_conv2d(m, "conv_a", "input", 8, 3, 5, 1, 2, 1, 2, 1)); /* [8, 20, 12] */
    d = desc_of(BRG_LAYER_BATCHNORM);
    d.epsilon = 1.001e-5f;
    d.momentum = 0.01f;
    d.scale = 0;
    ADD(brg_model_add(m, "bn_a", &d, (const char *[]){"conv_a"}, 1, NULL));
    ADD(brg_model_add_relu(m, "relu_a", "bn_a"));
    ADD(brg_model_begin_block(m, "branches"));
    ADD(brg_model_add_maxpool(m, "pool_max", "relu_a", 2, 2, 0)); /* [8, 10, 6] */
    ADD(brg_model_add_conv2d(m, "branch_conv", "pool_max", 4, 1, 1, 1, 1, 0, 0, 0));
    d = desc_of(BRG_LAYER_AVGPOOL);
    d.kernel_h = 3;
    d.kernel_w = 1;
    d.pad_h = 1;
    d.count_include_pad = 1;
    ADD(brg_model_add(m, "branch_avg", &d, (const char *[]){"pool_max"}, 1, NULL));
    ADD(brg_model_add_concat(m, "cat", cat_in, 3)); /* [20, 10, 6] */
    ADD(brg_model_begin_block(m, "merge"));
    ADD(brg_model_add_upsample(m, "up", "cat", 2)); /* [20, 20, 12] */
    ADD(brg_model_add_conv2d(m, "skip", "relu_a", 20, 1, 1, 1, 1, 0, 0, 1));
    d = desc_of(BRG_LAYER_ADD);
    ADD(brg_model_add(m, "sum", &d, (const char *[]){"up", "skip"}, 2, "merged"));
    ADD(brg_model_add_batchnorm(m, "bn_b", "merged", 1e-3f, 1, 0));
    ADD(brg_model_begin_block(m, "head"));
    ADD(brg_model_add_global_avgpool(m, "gap", "bn_b"));
    ADD(brg_model_add_dropout(m, "drop", "gap", 0.3f));
    ADD(brg_model_add_linear(m, "fc", "drop", 7, 1));
    ADD(brg_model_finalize(m, NULL));
#undef ADD
    if (st != BRG_OK) {
        fprintf(stderr, "building all-kinds: %s\n", brg_last_error());
        brg_model_destroy(m);
        return NULL;
    }
    return m;
}

static void test_every_kind(void)
{
    brg_model *m = build_all_kinds();
    CHECK(m != NULL);
    if (!m) return;
    int seen[BRG_LAYER_KIND_COUNT] = {0};
    for (int i = 0; i < brg_model_layer_count(m); i++) seen[brg_model_get_layer(m, i)->desc.kind] = 1;
    for (int k = 0; k < BRG_LAYER_KIND_COUNT; k++)
        CHECK_MSG(seen[k], "the all-kinds model lacks a %s layer", brg_layer_kind_name((brg_layer_kind)k));

    char *text = round_trip(m, "all-kinds");
    CHECK(text != NULL);
    if (text) {
        /* every field written, even at its default */
        CHECK(strstr(text, "\"stride\": [1, 2]") != NULL);
        CHECK(strstr(text, "\"padding\": [0, 0]") != NULL);
        CHECK(strstr(text, "\"epsilon\": 1.001e-5") != NULL);
        CHECK(strstr(text, "\"epsilon\": 0.001") != NULL);
        CHECK(strstr(text, "\"momentum\": 0.1,") != NULL);
        CHECK(strstr(text, "\"count_include_pad\": true") != NULL);
        CHECK(strstr(text, "\"output\": \"merged\"") != NULL);
        CHECK(strstr(text, "\"factor\": 2") != NULL);
        CHECK(strstr(text, "\"rate\": 0.3") != NULL);
    }
    free(text);

    /* through a file */
    char path[1200];
    brg_model *back = NULL;
    char why[256] = "";
    snprintf(path, sizeof path, "%s/all-kinds.json", tmpdir);
    CHECK_OK(brg_model_save_json(m, path));
    CHECK_OK(brg_model_load_json(path, &back));
    CHECK_MSG(back && brg_model_equal(m, back, why, sizeof why), "file round trip: %s", why);
    brg_model_destroy(back);
    remove(path);
    brg_model_destroy(m);
}

/* ---- floats bit for bit --------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint32_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float bits_to_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Floats of every magnitude (denormals, the extremes and values with no
 * short decimal form) in batchnorm epsilon and momentum and dropout rates
 * must read back with the same bits, whatever LC_NUMERIC says. */
static void test_float_bits(const char *locale)
{
    enum { N = 400 };
    static const float fixed_eps[] = {1e-3f, 1e-5f, 1.001e-5f, 0.1f, 1.0f, 3.0f, FLT_MIN, 1.4e-45f, FLT_MAX,
                                      1.17549421e-38f /* the largest denormal */, 0.3333333f, 16777217.0f};
    static const float fixed_unit[] = {0.0f, 1.0f, 0.1f, 0.99f, 0.9997f, 0.5f, 0.2f, 0.3f, 0.7f, 0.9f};
    float eps[N], mom[N], rate[N];
    rng_state = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < N; i++) {
        int nf = (int)(sizeof fixed_eps / sizeof fixed_eps[0]), nu = (int)(sizeof fixed_unit / sizeof fixed_unit[0]);
        /* any positive finite float; momentum in [0, 1]; rate in [0, 1) */
        eps[i] = i < nf ? fixed_eps[i] : bits_to_float(1 + rng_next() % 0x7F7FFFFFu);
        mom[i] = i < nu ? fixed_unit[i] : bits_to_float(rng_next() % 0x3F800001u);
        rate[i] = i < nu ? fixed_unit[i] : bits_to_float(rng_next() % 0x3F800000u);
        if (rate[i] >= 1.0f) rate[i] = 0.5f;
    }
    brg_model *m = NULL;
    brg_status st = brg_model_create("floats", 2, 2, 2, &m);
    char prev[32] = "input", name[32];
    if (st == BRG_OK) st = brg_model_begin_block(m, "all");
    for (int i = 0; i < N && st == BRG_OK; i++) {
        brg_layer_desc d = brg_layer_desc_init(BRG_LAYER_BATCHNORM);
        d.epsilon = eps[i];
        d.momentum = mom[i];
        snprintf(name, sizeof name, "bn%d", i);
        st = brg_model_add(m, name, &d, (const char *[]){prev}, 1, NULL);
        snprintf(prev, sizeof prev, "%s", name);
        snprintf(name, sizeof name, "drop%d", i);
        if (st == BRG_OK) st = brg_model_add_dropout(m, name, prev, rate[i]);
        snprintf(prev, sizeof prev, "%s", name);
    }
    if (st == BRG_OK) st = brg_model_add_linear(m, "fc", prev, 2, 1);
    if (st == BRG_OK) st = brg_model_finalize(m, NULL);
    CHECK_OK(st);
    if (st != BRG_OK) {
        brg_model_destroy(m);
        return;
    }
    char *text = NULL;
    brg_model *back = NULL;
    CHECK_OK(brg_model_to_json(m, &text));
    if (text) CHECK_OK(brg_model_parse_json(text, strlen(text), "floats", &back));
    int bad = 0;
    for (int i = 0; back && i < brg_model_layer_count(m); i++) {
        const brg_layer_desc *a = &brg_model_get_layer(m, i)->desc, *b = &brg_model_get_layer(back, i)->desc;
        if (!same_bits(a->epsilon, b->epsilon) || !same_bits(a->momentum, b->momentum) ||
            !same_bits(a->rate, b->rate)) {
            if (bad++ < 5)
                fprintf(stderr, "layer %d: %.9g %.9g %.9g read back as %.9g %.9g %.9g\n", i, (double)a->epsilon,
                        (double)a->momentum, (double)a->rate, (double)b->epsilon, (double)b->momentum, (double)b->rate);
        }
    }
    CHECK(back != NULL);
    CHECK_MSG(bad == 0, "%s: %d layers lost float bits", locale, bad);
    /* short forms where they exist */
    CHECK(text && strstr(text, "\"epsilon\": 0.001,") && strstr(text, "\"epsilon\": 1e-5,") &&
          strstr(text, "\"momentum\": 0.9997,") && strstr(text, "\"rate\": 0.0}"));
    free(text);
    brg_model_destroy(back);
    brg_model_destroy(m);
}

/* ---- the zoo -------------------------------------------------------------- */

static void test_zoo(void)
{
    int n = brg_zoo_count();
    if (n == 0) fprintf(stderr, "note: the zoo is empty; no zoo round trips\n");
    for (int i = 0; i < n; i++) {
        const brg_zoo_entry *e = brg_zoo_entry_at(i);
        CHECK(e != NULL);
        if (!e) continue;
        brg_model *m = NULL;
        CHECK_OK(brg_zoo_build(e->name, NULL, &m));
        if (!m) continue;
        free(round_trip(m, e->name));
        brg_model_destroy(m);
    }
}

/* ---- the hand-written example -------------------------------------------- */

static void test_tiny_inception(void)
{
    brg_model *m = NULL;
    CHECK_OK(brg_model_load_json(MODELS_DIR "/tiny-inception.json", &m));
    if (!m) return;
    CHECK(strcmp(brg_model_name(m), "tiny-inception") == 0);
    CHECK(brg_model_block_count(m) == 4);
    CHECK(brg_model_find_block(m, "mixed1") == 1);
    CHECK(brg_model_classes(m) == 10);
    /* conv1 432, bn1 16+16, b1_conv 128, b3_reduce 128, b3_conv 8*12*9 = 864,
     * bpool_conv 64, res_conv1 and res_conv2 24*24*9 = 5184 each, res_bn1 24
     * (beta only), res_bn2 24+24, fc 24*10+10 = 250. */
    CHECK(brg_model_trainable_params(m) == 432 + 32 + 128 + 128 + 864 + 64 + 5184 + 24 + 5184 + 48 + 250);
    CHECK(brg_model_trainable_params(m) == 12338);
    CHECK(brg_model_frozen_params(m) == 2 * (16 + 24 + 24)); /* running mean and variance */
    int t = brg_model_find_tensor(m, "mixed1");
    CHECK(t >= 0);
    if (t >= 0) {
        const brg_model_tensor *x = brg_model_get_tensor(m, t);
        CHECK(x->c == 24 && x->h == 16 && x->w == 16);
        CHECK(strcmp(brg_model_get_layer(m, x->producer)->name, "concat1") == 0);
        CHECK(x->last_use_block == 2); /* read by the residual block */
    }
    int ids[8], count = 0;
    CHECK_OK(brg_model_boundary_tensors(m, 1, ids, 8, &count));
    CHECK(count == 1 && ids[0] == t);
    /* defaults filled in: bn1 has none written */
    const brg_layer *bn1 = brg_model_get_layer(m, 1);
    brg_layer_desc want = brg_layer_desc_init(BRG_LAYER_BATCHNORM);
    CHECK(bn1 && bn1->desc.epsilon == want.epsilon && bn1->desc.momentum == want.momentum && bn1->desc.scale == 1 &&
          bn1->desc.center == 1);
    free(round_trip(m, "tiny-inception"));
    brg_model_destroy(m);
}

/* ---- the bad files ---------------------------------------------------------- */

typedef struct bad_case {
    const char *file;
    brg_status status;
    const char *text; /* the message must contain it */
} bad_case;

static const bad_case bad_cases[] = {
    /* not JSON, or not a model */
    {"empty.json", BRG_ERR_FORMAT, "empty.json: the file is empty"},
    {"syntax-error.json", BRG_ERR_FORMAT, "syntax-error.json:9:7: invalid JSON: ']' expected near '{'"},
    {"trailing-garbage.json", BRG_ERR_FORMAT, "trailing-garbage.json:14:1: invalid JSON: end of file expected"},
    {"duplicate-key.json", BRG_ERR_FORMAT, "duplicate-key.json:8:102: invalid JSON: duplicate object key"},
    {"too-big-integer.json", BRG_ERR_FORMAT, "invalid JSON: too big integer"},
    {"invalid-utf8.json", BRG_ERR_FORMAT, "invalid-utf8.json:4:14: invalid JSON: unable to decode byte 0xe9"},
    {"top-level-array.json", BRG_ERR_FORMAT, "top level: a model file must hold a JSON object"},
    {"not-a-model.json", BRG_ERR_FORMAT, "missing required field 'format'"},
    {"wrong-format.json", BRG_ERR_FORMAT,
     "wrong-format.json:2:13: format: must be \"brigade-model\", got a string (\"keras-model\")"},
    {"unsupported-version.json", BRG_ERR_FORMAT, "version: version 2 is not supported; this brigade reads version 1"},
    /* missing and unknown fields */
    {"missing-kernel.json", BRG_ERR_FORMAT, "blocks[0].layers[0] (layer 'conv'): missing required field 'kernel'"},
    {"missing-inputs.json", BRG_ERR_FORMAT, "blocks[0].layers[1] (layer 'gap'): missing required field 'inputs'"},
    {"missing-bias.json", BRG_ERR_FORMAT,
     "blocks[0].layers[2] (layer 'fc'): missing required field 'bias' (true or false)"},
    {"missing-pool-stride.json", BRG_ERR_FORMAT, "(layer 'pool'): missing required field 'stride'"},
    {"input-missing-width.json", BRG_ERR_FORMAT, "input: missing required field 'width'"},
    {"unknown-field.json", BRG_ERR_FORMAT,
     "blocks[0].layers[0].kernal (layer 'conv'): unknown field 'kernal' in a conv2d layer (did you mean 'kernel'?)"},
    {"field-of-another-kind.json", BRG_ERR_FORMAT, "unknown field 'bias' in a batchnorm layer"},
    {"unknown-top-level-field.json", BRG_ERR_FORMAT, "unknown field 'block' in the top level (did you mean 'blocks'?)"},
    {"unknown-layer-type.json", BRG_ERR_FORMAT,
     "blocks[0].layers[0].type (layer 'conv'): unknown layer type 'conv3d' (did you mean 'conv2d'?); known types: "
     "conv2d, batchnorm, relu, maxpool, avgpool, global_avgpool, concat, add, linear, dropout, upsample"},
    /* values of the wrong type or out of range */
    {"string-for-number.json", BRG_ERR_FORMAT,
     "blocks[0].layers[0].out_channels (layer 'conv'): must be an integer in 1..16777216, got a string (\"4\")"},
    {"negative-channels.json", BRG_ERR_FORMAT,
     "out_channels (layer 'conv'): must be an integer in 1..16777216, got -4"},
    {"huge-channels.json", BRG_ERR_FORMAT, "must be an integer in 1..16777216, got 4294967296"},
    {"zero-stride.json", BRG_ERR_FORMAT,
     "stride (layer 'conv'): must be an integer or a [height, width] pair of integers in 1..1048576, got 0"},
    {"non-integer-kernel.json", BRG_ERR_FORMAT, "kernel (layer 'conv'): must be an integer or a [height, width] pair"},
    {"kernel-three-values.json", BRG_ERR_FORMAT, "got an array of 3"},
    {"kernel-string-element.json", BRG_ERR_FORMAT,
     "kernel[1] (layer 'conv'): the width must be an integer in 1..1048576, got a string"},
    {"bias-not-boolean.json", BRG_ERR_FORMAT, "bias (layer 'conv'): must be true or false, got 1"},
    {"epsilon-zero.json", BRG_ERR_FORMAT, "epsilon (layer 'bn'): must be a number in (0, infinity), got 0"},
    {"epsilon-underflows-float.json", BRG_ERR_FORMAT, "got 1e-50 (0 as a float)"},
    {"dropout-rate-one.json", BRG_ERR_FORMAT, "rate (layer 'drop'): must be a number in [0, 1), got 1.0"},
    {"upsample-factor-too-large.json", BRG_ERR_FORMAT, "factor (layer 'up'): must be an integer in 1..64, got 100"},
    {"name-too-long.json", BRG_ERR_FORMAT, "blocks[0].layers[1].name: names are at most 63 bytes"},
    {"layer-not-object.json", BRG_ERR_FORMAT, "blocks[0].layers[1]: a layer must be an object"},
    {"inputs-not-array.json", BRG_ERR_FORMAT, "inputs (layer 'gap'): must be an array of tensor names"},
    {"add-one-input.json", BRG_ERR_FORMAT, "inputs (layer 'sum'): an add layer takes 2 inputs, given 1"},
    {"pool-padding-too-large.json", BRG_ERR_FORMAT, "must be at most half of the 2x2 pooling window"},
    /* the graph */
    {"dangling-tensor.json", BRG_ERR_FORMAT,
     "blocks[0].layers[2].inputs[0] (layer 'fc'): no layer writes tensor 'pool'"},
    {"forward-reference.json", BRG_ERR_FORMAT,
     "inputs[0] (layer 'gap'): cycle or forward reference: tensor 'fc' is written later, by layer 'fc' at "
     "blocks[0].layers[2]"},
    {"self-reference.json", BRG_ERR_FORMAT, "cycle or forward reference: the layer reads its own output 'gap'"},
    {"cycle-across-blocks.json", BRG_ERR_FORMAT,
     "cycle or forward reference: tensor 'relu' is written later, by layer 'relu' at blocks[1].layers[0]"},
    {"duplicate-layer-name.json", BRG_ERR_FORMAT,
     "blocks[0].layers[1].name: duplicate layer name 'conv': blocks[0].layers[0] already has it"},
    {"duplicate-tensor-name.json", BRG_ERR_FORMAT,
     "duplicate tensor name 'conv': layer 'conv' at blocks[0].layers[0] already writes it"},
    {"duplicate-block-name.json", BRG_ERR_FORMAT, "blocks[1].name: duplicate block name 'main'"},
    {"layer-writes-input.json", BRG_ERR_FORMAT, "'input' is the model input"},
    {"empty-model.json", BRG_ERR_FORMAT, "blocks: the model has no blocks"},
    {"empty-block.json", BRG_ERR_FORMAT, "blocks[1].layers: block 'head' has no layers"},
    {"missing-output.json", BRG_ERR_FORMAT, "output: no layer writes tensor 'logits'"},
    {"unused-tensor.json", BRG_ERR_FORMAT, "blocks[0].layers[1] (layer 'side'): its output 'side' is never read"},
    /* shapes */
    {"concat-spatial-mismatch.json", BRG_ERR_SHAPE,
     "blocks[0].layers[2]: layer 'cat' (concat): 'conv' is [4, 6, 6] but 'pool' is [4, 3, 3]; only channels may "
     "differ"},
    {"add-shape-mismatch.json", BRG_ERR_SHAPE, "'conv' is [4, 6, 6] but 'pool' is [4, 3, 3]; they must match"},
    {"kernel-larger-than-input.json", BRG_ERR_SHAPE,
     "a 9x3 window with padding 0x0 needs an input of at least 9x3, but 'input' is [1, 8, 8]"},
};

#define N_BAD ((int)(sizeof bad_cases / sizeof bad_cases[0]))

static void test_bad_files(void)
{
    int used[N_BAD] = {0};
    DIR *dir = opendir(BAD_DIR);
    CHECK_MSG(dir != NULL, "cannot open %s", BAD_DIR);
    if (!dir) return;
    int files = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.') continue;
        files++;
        int k = 0;
        while (k < N_BAD && strcmp(bad_cases[k].file, e->d_name) != 0) k++;
        CHECK_MSG(k < N_BAD, "%s/%s has no entry in bad_cases[] in %s", BAD_DIR, e->d_name, __FILE__);
        if (k == N_BAD) continue;
        used[k]++;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", BAD_DIR, e->d_name);
        brg_model *m = (brg_model *)&used; /* must come back NULL */
        brg_status st = brg_model_load_json(path, &m);
        CHECK_MSG(st == bad_cases[k].status, "%s: got %s, expected %s: %s", e->d_name, brg_status_string(st),
                  brg_status_string(bad_cases[k].status), brg_last_error());
        CHECK_MSG(m == NULL, "%s: *out not NULL after a failure", e->d_name);
        CHECK_MSG(strstr(brg_last_error(), bad_cases[k].text) != NULL, "%s: message\n    %s\n  lacks\n    %s",
                  e->d_name, brg_last_error(), bad_cases[k].text);
        CHECK_MSG(strncmp(brg_last_error(), path, strlen(path)) == 0, "%s: message does not start with the file: %s",
                  e->d_name, brg_last_error());
        if (st == BRG_OK) brg_model_destroy(m);
    }
    closedir(dir);
    for (int k = 0; k < N_BAD; k++)
        CHECK_MSG(used[k] == 1, "bad_cases[] lists %s, which is not in %s", bad_cases[k].file, BAD_DIR);
    CHECK(files == N_BAD);
}

/* ---- errors that need no file --------------------------------------------- */

static brg_status parse(const char *text, brg_model **m)
{
    return brg_model_parse_json(text, strlen(text), "t.json", m);
}

/* A minimal valid document with layers_json as its one block's layers. */
static brg_status parse_layers(const char *layers_json, brg_model **m)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\"format\": \"brigade-model\", \"version\": 1, \"name\": \"t\",\n"
             " \"input\": {\"channels\": 2, \"height\": 9, \"width\": 7},\n"
             " \"blocks\": [{\"name\": \"b\", \"layers\": [\n%s\n]}]}\n",
             layers_json);
    return parse(text, m);
}

static void test_inline_errors(void)
{
    brg_model *m = NULL;
    char why[256] = "";

    CHECK_STATUS(brg_model_load_json(BAD_DIR "/no-such-file.json", &m), BRG_ERR_IO);
    CHECK_ERROR_HAS("cannot open model file");
    CHECK_ERROR_HAS("no-such-file.json");
    CHECK_STATUS(brg_model_load_json(MODELS_DIR, &m), BRG_ERR_INVALID_ARGUMENT); /* a folder: the wrong thing given */
    CHECK_ERROR_HAS(MODELS_DIR);
    CHECK(m == NULL);
    CHECK_STATUS(brg_model_load_json(NULL, &m), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_model_parse_json("{}", 2, "t", NULL), BRG_ERR_INVALID_ARGUMENT);

    CHECK_STATUS(parse(" \n\t ", &m), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("t.json: the file is empty");
    CHECK_STATUS(brg_model_parse_json("{\"a\"\0: 1}", 9, "nul.json", &m), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("nul.json:1:");
    CHECK_STATUS(parse("42", &m), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("must hold a JSON object");
    CHECK_STATUS(parse("{\"format\": \"brigade-model\", \"version\": \"1\"}", &m), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("t.json:1:40: version: must be an integer, got a string (\"1\")");

    /* line and column of a content error */
    CHECK_STATUS(parse_layers("{\"name\": \"c\", \"type\": \"conv2d\", \"inputs\": [\"input\"],\n"
                              "  \"out_channels\": 4, \"kernel\": [3, 0], \"bias\": false}",
                              &m),
                 BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("t.json:5:36: blocks[0].layers[0].kernel[1] (layer 'c'): the width must be an integer in "
                    "1..1048576, got 0");

    /* layer-free types: no fields beyond the common ones */
    CHECK_STATUS(parse_layers("{\"name\": \"r\", \"type\": \"relu\", \"inputs\": [\"input\"], \"rate\": 0.5}", &m),
                 BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("unknown field 'rate' in a relu layer; its fields are: name, type, inputs, output, comment; "
                    "'rate' belongs to dropout layers");
    CHECK_STATUS(parse_layers("{\"name\": \"r\", \"type\": \"relu\", \"inputs\": [\"input\"], \"comment\": 3}", &m),
                 BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("comment (layer 'r'): must be a string, got 3");
    CHECK_STATUS(parse_layers("{\"name\": \"r\", \"type\": \"relu\", \"inputs\": [\"inptu\"]}", &m), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("no layer writes tensor 'inptu' (did you mean 'input'?)");
    CHECK_STATUS(parse_layers("{\"name\": \"r\", \"type\": \"Relu\", \"inputs\": [\"input\"]}", &m), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("unknown layer type 'Relu' (did you mean 'relu'?)");
    CHECK_STATUS(parse_layers("{\"name\": \"g\", \"type\": \"global_avgpool\", \"inputs\": [\"input\"]},\n"
                              "{\"name\": \"fc\", \"type\": \"linear\", \"inputs\": [\"g\"], \"out_features\": 1e3, "
                              "\"bias\": true}",
                              &m),
                 BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("out_features (layer 'fc'): must be an integer in 1..16777216, got 1000.0 (write integers "
                    "without a decimal point or exponent)");
    CHECK_STATUS(parse_layers("{\"name\": \"d\", \"type\": \"dropout\", \"inputs\": [\"input\"], \"rate\": -0.5}", &m),
                 BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("must be a number in [0, 1), got -0.5");
    CHECK_STATUS(
        parse_layers("{\"name\": \"b\", \"type\": \"batchnorm\", \"inputs\": [\"input\"], \"epsilon\": 1e300}", &m),
        BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("(too large for a float)");
    CHECK_STATUS(parse_layers("{\"name\": \"r\", \"type\": \"relu\", \"inputs\": [\"input\"]},\n"
                              "{\"name\": \"r\", \"type\": \"relu\", \"inputs\": [\"r\"]}",
                              &m),
                 BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("t.json:5:10: blocks[0].layers[1].name: duplicate layer name 'r': blocks[0].layers[0] already "
                    "has it");
    CHECK_STATUS(parse_layers("{\"name\": \"c\", \"type\": \"concat\", \"inputs\": []}", &m), BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("a concat layer takes 1 to 16 inputs, given 0");
    CHECK_STATUS(parse_layers("{\"name\": \"c\", \"type\": \"conv2d\", \"inputs\": [\"input\"], \"out_channels\": 2, "
                              "\"kernel\": 3, \"bias\": false, \"output\": \"\"}",
                              &m),
                 BRG_ERR_FORMAT);
    CHECK_ERROR_HAS("output (layer 'c'): must be a non-empty string, got a string (\"\")");
    CHECK(m == NULL);

    /* hand-written shorthands and defaults: a scalar is [n, n]; absent
     * fields are brg_layer_desc_init's */
    CHECK_OK(parse_layers("{\"name\": \"c\", \"type\": \"conv2d\", \"inputs\": [\"input\"], \"out_channels\": 3, "
                          "\"kernel\": 3, \"bias\": true},\n"
                          "{\"name\": \"p\", \"type\": \"avgpool\", \"inputs\": [\"c\"], \"kernel\": [2, 1], "
                          "\"stride\": 2},\n"
                          "{\"name\": \"u\", \"type\": \"upsample\", \"inputs\": [\"p\"], \"comment\": \"nearest\"},\n"
                          "{\"name\": \"d\", \"type\": \"dropout\", \"inputs\": [\"u\"], \"output\": \"logits\"}",
                          &m));
    if (m) {
        brg_layer_desc c = brg_layer_desc_init(BRG_LAYER_CONV2D), p = brg_layer_desc_init(BRG_LAYER_AVGPOOL);
        brg_layer_desc u = brg_layer_desc_init(BRG_LAYER_UPSAMPLE), d = brg_layer_desc_init(BRG_LAYER_DROPOUT);
        c.out_channels = 3;
        c.kernel_h = c.kernel_w = 3;
        c.bias = 1;
        p.kernel_h = 2;
        p.stride_h = p.stride_w = 2;
        const brg_layer_desc *want[4] = {&c, &p, &u, &d};
        for (int i = 0; i < 4; i++)
            CHECK_MSG(memcmp(&brg_model_get_layer(m, i)->desc, want[i], sizeof c) == 0,
                      "layer %d: not the defaults", i);
        int out = brg_model_output(m);
        CHECK(out >= 0 && strcmp(brg_model_get_tensor(m, out)->name, "logits") == 0);
        const brg_model_tensor *x = brg_model_get_tensor(m, out);
        CHECK(x->c == 3 && x->h == 6 && x->w == 6); /* 7x5 -> avgpool 2x1/2 -> 3x3 -> x2 */
        free(round_trip(m, "defaults"));
        brg_model_destroy(m);
        m = NULL;
    }

    /* a byte order mark is skipped */
    {
        size_t n = 0;
        char *text = slurp(MODELS_DIR "/tiny-inception.json", &n);
        CHECK(text != NULL);
        char *bom = text ? malloc(n + 3) : NULL;
        if (bom) {
            memcpy(bom, "\xEF\xBB\xBF", 3);
            memcpy(bom + 3, text, n);
            CHECK_OK(brg_model_parse_json(bom, n + 3, "bom.json", &m));
            brg_model_destroy(m);
            m = NULL;
        }
        free(bom);
        free(text);
    }

    /* names with characters JSON must escape survive */
    brg_model *a = NULL;
    const char *odd = "q\"uo\\te/\xc3\xa9\t";
    CHECK_OK(brg_model_create("odd \"names\"", 1, 4, 4, &a));
    if (a) {
        CHECK_OK(brg_model_begin_block(a, "b\\1"));
        CHECK_OK(brg_model_add_relu(a, odd, "input"));
        CHECK_OK(brg_model_add_global_avgpool(a, "g", odd));
        /* writing before finalize fails */
        char *text = NULL;
        CHECK_STATUS(brg_model_to_json(a, &text), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("not finalized");
        CHECK(text == NULL);
        CHECK_OK(brg_model_finalize(a, NULL));
        free(round_trip(a, "odd names"));
        char path[1200];
        snprintf(path, sizeof path, "%s/no-such-dir/m.json", tmpdir);
        CHECK_STATUS(brg_model_save_json(a, path), BRG_ERR_IO);
        CHECK_ERROR_HAS("no-such-dir/m.json");
        brg_model_destroy(a);
    }
    /* JSON has no infinity; the builder takes an infinite epsilon */
    a = NULL;
    CHECK_OK(brg_model_create("inf", 1, 4, 4, &a));
    if (a) {
        char *text = NULL;
        CHECK_OK(brg_model_begin_block(a, "b"));
        if (brg_model_add_batchnorm(a, "bn", "input", INFINITY, 1, 1) == BRG_OK) {
            CHECK_OK(brg_model_finalize(a, NULL));
            CHECK_STATUS(brg_model_to_json(a, &text), BRG_ERR_INVALID_ARGUMENT);
            CHECK_ERROR_HAS("cannot write layer 'bn' to JSON: its epsilon is inf");
            CHECK(text == NULL);
        }
        brg_model_destroy(a);
    }
    /* a name that is not UTF-8 cannot be written as JSON */
    a = NULL;
    CHECK_OK(brg_model_create("caf\xe9", 1, 4, 4, &a));
    if (a) {
        char *text = NULL;
        CHECK_OK(brg_model_begin_block(a, "b"));
        CHECK_OK(brg_model_add_relu(a, "r", "input"));
        CHECK_OK(brg_model_finalize(a, NULL));
        CHECK_STATUS(brg_model_to_json(a, &text), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("not valid UTF-8");
        CHECK(text == NULL);
        brg_model_destroy(a);
    }
    (void)why;
}

/* ---- damaged files ------------------------------------------------------------ */

/* Every truncation of the example and many one-byte changes must fail with
 * a format or shape error (or, for a harmless change, load), never crash,
 * and always leave *out NULL on failure. */
static void test_damage(void)
{
    size_t n = 0;
    char *text = slurp(MODELS_DIR "/tiny-inception.json", &n);
    CHECK(text != NULL);
    if (!text) return;
    char *copy = malloc(n + 1);
    CHECK(copy != NULL);
    if (!copy) {
        free(text);
        return;
    }
    int odd = 0, loaded = 0, tries = 0;
    for (size_t cut = 0; cut < n; cut++) {
        brg_model *m = NULL;
        brg_status st = brg_model_parse_json(text, cut, "cut.json", &m);
        tries++;
        /* only whitespace may go from the end */
        int trailing_ws = strspn(text + cut, " \n") == n - cut;
        if (st != (trailing_ws ? BRG_OK : BRG_ERR_FORMAT) || (st != BRG_OK && m) ||
            (st != BRG_OK && strncmp(brg_last_error(), "cut.json", 8) != 0)) {
            if (odd++ < 5) fprintf(stderr, "cut at %zu: %s: %s\n", cut, brg_status_string(st), brg_last_error());
        }
        brg_model_destroy(m);
    }
    static const char repl[] = {'x', '0', '9', '"', '}', ']', ',', ' ', '-', '\\'};
    for (size_t at = 0; at < n; at++) {
        for (size_t k = 0; k < 4; k++) { /* four of the replacements, a different four at each byte */
            char c = repl[(at * 7 + k * 3) % sizeof repl];
            if (text[at] == c) continue;
            memcpy(copy, text, n + 1);
            copy[at] = c;
            brg_model *m = NULL;
            brg_status st = brg_model_parse_json(copy, n, "changed.json", &m);
            tries++;
            if (st == BRG_OK) loaded++;
            if ((st != BRG_OK && st != BRG_ERR_FORMAT && st != BRG_ERR_SHAPE) || (st != BRG_OK && m) ||
                (st != BRG_OK && strncmp(brg_last_error(), "changed.json", 12) != 0)) {
                if (odd++ < 5)
                    fprintf(stderr, "byte %zu -> '%c': %s: %s\n", at, c, brg_status_string(st), brg_last_error());
            }
            brg_model_destroy(m);
        }
    }
    fprintf(stderr, "damage: %d parses, %d changed files still load\n", tries, loaded);
    CHECK_MSG(odd == 0, "%d damaged files were handled wrongly", odd);
    free(copy);
    free(text);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/tmp-json-XXXXXX", BRG_TEST_BUILDDIR);
    if (!mkdtemp(tmpdir)) {
        perror(tmpdir);
        return 99;
    }
    test_every_kind();
    test_float_bits("C");
    /* a locale whose decimal point is a comma must change nothing */
    const char *comma[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", "de_DE", "fr_FR"};
    int found = 0;
    for (size_t i = 0; i < sizeof comma / sizeof comma[0] && !found; i++) {
        if (!setlocale(LC_NUMERIC, comma[i])) continue;
        found = 1;
        char probe[16];
        snprintf(probe, sizeof probe, "%.1f", 0.5);
        CHECK(strcmp(probe, "0,5") == 0);
        test_float_bits(comma[i]);
        test_every_kind();
        setlocale(LC_NUMERIC, "C");
    }
    if (!found) fprintf(stderr, "note: no locale with a decimal comma here; LC_NUMERIC not tested\n");
    test_zoo();
    test_tiny_inception();
    test_bad_files();
    test_inline_errors();
    test_damage();
    CHECK_MSG(rmdir(tmpdir) == 0, "temporary folder %s not empty", tmpdir);
    TEST_EXIT();
}
