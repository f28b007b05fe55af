/* ONNX's own node tests (Debian's libonnx-testdata: a one-node model.onnx
 * and test_data_set_0/ with its inputs and expected outputs as serialized
 * TensorProtos) through brigade's importer.
 *
 * Every test of an op brigade imports is listed below with what must
 * happen:
 * - PASS: the model imports, a one-device pipeline predicts from input_0,
 *   and the outputs equal output_0 within 1e-4 (relative to the larger of
 *   1 and the value). The tests give everything but the data (weights,
 *   shapes, scales, pads) as further graph inputs with fixed values in
 *   input_1.pb, ...: those become initializers before the import, as an
 *   exporter writes them (binding graph inputs is tested in test_import);
 * - REFUSE: the import fails with BRG_ERR_UNSUPPORTED (or FORMAT) and a
 *   message holding the given words: what brigade cannot do exactly is
 *   refused, never approximated;
 * - SKIP: a reason it cannot be run this way.
 * A test whose outcome is not the listed one fails, and so does an
 * unlisted test of an imported op (the table must say what it does).
 *
 * Exits 77 when this build has no ONNX importer or the test data is not
 * installed (apt-get install libonnx-testdata). BRG_ONNX_SURVEY=1 prints
 * what every test of an imported op does, for writing the table. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#include "brigade/import.h"
#include "import_test.h"

#ifdef BRG_HAVE_ONNX
#include "model/import/onnx-impl.h"

#ifndef BRG_ONNX_NODE_TESTS
#define BRG_ONNX_NODE_TESTS "/usr/share/libonnx-testdata/data/node"
#endif

typedef enum expect { PASS, REFUSE, SKIP } expect;

typedef struct node_case {
    const char *name;
    expect what;
    const char *words; /* REFUSE: in the message; SKIP: why */
} node_case;

static const node_case cases[] = {
#include "onnx_node_cases.h"
};

/* Op prefixes of the tests that must be listed. */
static const char *const imported[] = {
    "test_conv_", "test_basic_conv_", "test_batchnorm_", "test_relu", "test_maxpool_", "test_averagepool_",
    "test_globalaveragepool", "test_concat_", "test_add", "test_gemm_", "test_matmul_", "test_flatten_",
    "test_reshape_", "test_dropout_", "test_identity", "test_resize_", "test_upsample_", "test_constant_pad",
    "test_edge_pad", "test_reflect_pad", "test_softmax_", "test_constant",
};

static int is_imported(const char *name)
{
    for (size_t i = 0; i < sizeof imported / sizeof imported[0]; i++) {
        const size_t n = strlen(imported[i]);
        if (strncmp(name, imported[i], n) == 0) {
            /* test_constant_pad vs test_constantofshape_: only the exact op */
            if (strcmp(imported[i], "test_constant") == 0 && strcmp(name, "test_constant") != 0) continue;
            if (strcmp(imported[i], "test_relu") == 0 && strcmp(name, "test_relu") != 0) continue;
            if (strcmp(imported[i], "test_add") == 0 && strncmp(name, "test_add_", 9) != 0 &&
                strcmp(name, "test_add") != 0)
                continue;
            return 1;
        }
    }
    return 0;
}

typedef enum outcome { GOT_PASS, GOT_REFUSED, GOT_WRONG, GOT_ERROR } outcome;

static int read_tensor(const char *dir, const char *kind, int i, onnx_tensor *t, char *name, size_t size)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/test_data_set_0/%s_%d.pb", dir, kind, i);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fclose(f);
    return onnx_tensor_read_file(path, t, name, size) == BRG_OK ? 1 : -1;
}

/* The test's model with graph inputs 1, 2, ... made initializers holding
 * input_1.pb, ... */
static brg_status import_fixed(const char *dir, brg_import **imp)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return brg_error(BRG_ERR_IO, "cannot open %s", path);
    static uint8_t bytes[1 << 20];
    const size_t len = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, bytes);
    if (!mp || !mp->graph) {
        if (mp) onnx__model_proto__free_unpacked(mp, NULL);
        return brg_import_onnx(path, imp); /* let the importer say what is wrong */
    }
    Onnx__GraphProto *g = mp->graph;
    for (size_t i = 1; i < g->n_input; i++) {
        char pb[1200];
        snprintf(pb, sizeof pb, "%s/test_data_set_0/input_%zu.pb", dir, i);
        FILE *in = fopen(pb, "rb");
        if (!in) break;
        static uint8_t tb[1 << 20];
        const size_t tl = fread(tb, 1, sizeof tb, in);
        fclose(in);
        Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, tl, tb);
        Onnx__TensorProto **more = realloc(g->initializer, (g->n_initializer + 1) * sizeof *more);
        if (!t || !more) {
            if (t) onnx__tensor_proto__free_unpacked(t, NULL);
            onnx__model_proto__free_unpacked(mp, NULL);
            return brg_error(BRG_ERR_FORMAT, "cannot read %s", pb);
        }
        free(t->name);
        t->name = strdup(g->input[i]->name);
        g->initializer = more;
        g->initializer[g->n_initializer++] = t;
    }
    const size_t size = onnx__model_proto__get_packed_size(mp);
    uint8_t *packed = malloc(size ? size : 1);
    if (packed) onnx__model_proto__pack(mp, packed);
    onnx__model_proto__free_unpacked(mp, NULL);
    if (!packed) return BRG_ERR_HOST_MEMORY;
    const brg_status st = brg_import_onnx_bytes(packed, size, path, imp);
    free(packed);
    return st;
}

/* Import, predict, compare. *message gets the import's error or what
 * went wrong. */
static outcome run_case(const char *dir, char *message, size_t size)
{
    brg_import *imp = NULL;
    brg_clear_error();
    brg_status st = import_fixed(dir, &imp);
    if (st != BRG_OK) {
        snprintf(message, size, "%s", brg_last_error());
        return st == BRG_ERR_UNSUPPORTED || st == BRG_ERR_FORMAT ? GOT_REFUSED : GOT_ERROR;
    }
    outcome got = GOT_ERROR;
    onnx_tensor x, want;
    memset(&x, 0, sizeof x);
    memset(&want, 0, sizeof want);
    float *out = NULL;
    const brg_model *m = brg_import_model(imp);
    char tname[256];
    if (read_tensor(dir, "input", 0, &x, tname, sizeof tname) != 1 ||
        read_tensor(dir, "output", 0, &want, tname, sizeof tname) != 1) {
        snprintf(message, size, "cannot read the test's input_0 or output_0");
        goto done;
    }
    if (!brg_import_has_weights(imp)) {
        snprintf(message, size, "weights left unbound");
        goto done;
    }
    const int n = (int)x.dims[0];
    const int64_t per_in = sample_floats(m);
    const brg_model_tensor *o = brg_model_get_tensor(m, brg_model_output(m));
    const int64_t per_out = o->c * o->h * o->w;
    if (x.count != n * per_in || want.count != n * per_out) {
        snprintf(message, size, "sizes: input %lld for %d x %lld, output %lld for %d x %lld", (long long)x.count, n,
                 (long long)per_in, (long long)want.count, n, (long long)per_out);
        goto done;
    }
    out = malloc((size_t)want.count * sizeof *out);
    st = out ? import_predict(imp, x.f, n, out) : BRG_ERR_HOST_MEMORY;
    if (st != BRG_OK) {
        snprintf(message, size, "running: %s", brg_last_error());
        goto done;
    }
    got = GOT_PASS;
    for (int64_t k = 0; k < want.count; k++) {
        const double scale = fabs(want.f[k]) > 1.0 ? fabs(want.f[k]) : 1.0;
        if (!(fabs((double)out[k] - want.f[k]) <= 1e-4 * scale)) {
            snprintf(message, size, "output %lld is %.7g, expected %.7g", (long long)k, out[k], want.f[k]);
            got = GOT_WRONG;
            break;
        }
    }
done:
    free(out);
    onnx_tensor_free(&x);
    onnx_tensor_free(&want);
    brg_import_free(imp);
    return got;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

#endif /* BRG_HAVE_ONNX */

int main(void)
{
#ifndef BRG_HAVE_ONNX
    printf("SKIP: built without the ONNX importer\n");
    return 77;
#else
    if (!brg_import_onnx_available()) {
        printf("SKIP: built without the ONNX importer\n");
        return 77;
    }
    const char *root = getenv("BRG_ONNX_NODE_TESTS") ? getenv("BRG_ONNX_NODE_TESTS") : BRG_ONNX_NODE_TESTS;
    DIR *d = opendir(root);
    if (!d) {
        printf("SKIP: no ONNX node tests in %s (apt-get install libonnx-testdata)\n", root);
        return 77;
    }
    char *names[2048];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 2048;)
        if (is_imported(e->d_name)) names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    const int survey = getenv("BRG_ONNX_SURVEY") != NULL;
    int passed = 0, refused = 0, skipped = 0;
    for (int i = 0; i < n; i++) {
        const node_case *c = NULL;
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
            if (strcmp(cases[k].name, names[i]) == 0) c = &cases[k];
        if (!survey && !c) {
            fprintf(stderr, "FAIL: %s is a test of an imported op missing from tests/onnx_node_cases.h\n", names[i]);
            test_failures++;
            continue;
        }
        if (c && c->what == SKIP && !survey) {
            skipped++;
            continue;
        }
        char dir[1024], message[1024] = "";
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        const outcome got = run_case(dir, message, sizeof message);
        if (survey) {
            static const char *const said[] = {"PASS", "REFUSED", "WRONG", "ERROR"};
            printf("%-60s %s %s\n", names[i], said[got], message);
            continue;
        }
        if (c->what == PASS && got == GOT_PASS) passed++;
        else if (c->what == REFUSE && got == GOT_REFUSED && strstr(message, c->words)) refused++;
        else {
            fprintf(stderr, "FAIL: %s: expected %s%s%s, got: %s\n", names[i], c->what == PASS ? "a pass" : "a refusal",
                    c->what == PASS ? "" : " saying ", c->what == PASS ? "" : c->words,
                    got == GOT_PASS ? "a pass" : message);
            test_failures++;
        }
    }
    for (size_t k = 0; !survey && k < sizeof cases / sizeof cases[0]; k++) {
        int found = 0;
        for (int i = 0; i < n && !found; i++) found = strcmp(names[i], cases[k].name) == 0;
        if (!found) {
            fprintf(stderr, "FAIL: %s is listed but not in %s\n", cases[k].name, root);
            test_failures++;
        }
    }
    for (int i = 0; i < n; i++) free(names[i]);
    if (!survey) printf("%d node tests: %d pass, %d refused as expected, %d skipped\n", n, passed, refused, skipped);
    return test_failures ? 1 : 0;
#endif
}
