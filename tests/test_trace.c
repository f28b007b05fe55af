/* Timelines and their writers (brigade/trace.h), and the unit-cost
 * simulation that 'brigade bench --simulate --stages P' reports:
 *   - simulated bubble fractions equal the closed forms of
 *     docs/schedules.md for GPipe, 1F1B, interleaved (v = 2, 3) and ZB-H1
 *     over p = 1..8 and m = 1..16;
 *   - the Chrome trace parses (jansson), has one named track per device and
 *     every action exactly once with its micro-batch, chunk and times;
 *   - the SVG timeline is well-formed XML with one row per device and every
 *     action exactly once; the memory chart one group per device;
 *   - bad timelines and unwritable paths fail with the right status;
 *   - brg_plan_schedule_times gives the times the plan simulated (its
 *     makespan comes back exactly), for every schedule. */
#include <jansson.h>
#include <unistd.h>

#include "testutil.h"

/* ---- unit-cost simulation ---- */

static brg_schedule_sim *simulate_unit(brg_schedule_kind kind, int p, int m, int v, brg_schedule **sched)
{
    *sched = NULL;
    brg_schedule_sim *sim = NULL;
    if (brg_schedule_build(kind, p, m, v, sched) != BRG_OK) return NULL;
    double ones[BRG_PROGRAM_MAX_CHUNKS * 8];
    for (int j = 0; j < p * v; j++) ones[j] = 1.0;
    brg_schedule_times t = {ones, ones, ones, NULL};
    if (brg_schedule_simulate(*sched, &t, &sim) != BRG_OK) return NULL;
    return sim;
}

/* The closed forms (docs/schedules.md), F = B = W = 1, unsplit backward 2. */
static double expected_bubble(brg_schedule_kind kind, int p, int m, int v)
{
    switch (kind) {
    case BRG_SCHEDULE_GPIPE:
    case BRG_SCHEDULE_1F1B: return (double)(p - 1) / (m + p - 1);
    case BRG_SCHEDULE_INTERLEAVED: return (double)(p - 1) / (v * m + p - 1);
    case BRG_SCHEDULE_ZB_H1:
    case BRG_SCHEDULE_ZB_H2: /* at unit costs ZB-H2 is as short as ZB-H1 */
        return 1.0 - 3.0 * m / (2.0 * m + p - 1 + (m > p ? m : p));
    default: return -1.0;
    }
}

static void test_analytic_bubbles(void)
{
    int compared = 0;
    for (int p = 1; p <= 8; p++)
        for (int m = 1; m <= 16; m++)
            for (int k = 0; k < BRG_SCHEDULE_KIND_COUNT; k++) {
                const brg_schedule_kind kind = (brg_schedule_kind)k;
                if (brg_schedule_kind_is_v(kind)) continue; /* no closed form: test_schedule's test_vshape */
                for (int v = brg_schedule_kind_chunks(kind, 0);
                     v <= (kind == BRG_SCHEDULE_INTERLEAVED ? 3 : brg_schedule_kind_chunks(kind, 0)); v++) {
                    /* Interleaved's closed form holds for m a multiple of p. */
                    if (kind == BRG_SCHEDULE_INTERLEAVED && m % p) continue;
                    brg_schedule *s = NULL;
                    brg_schedule_sim *sim = simulate_unit(kind, p, m, v, &s);
                    CHECK_MSG(sim != NULL, "%s p=%d m=%d v=%d: %s", brg_schedule_kind_name(kind), p, m, v,
                              brg_last_error());
                    if (sim) {
                        const double want = expected_bubble(kind, p, m, v);
                        CHECK_MSG(fabs(sim->bubble - want) < 1e-12, "%s p=%d m=%d v=%d: bubble %.15g, expected %.15g",
                                  brg_schedule_kind_name(kind), p, m, v, sim->bubble, want);
                        /* Every device idles the same share at unit costs. */
                        for (int d = 0; d < p; d++) CHECK(fabs(sim->idle[d] - want) < 1e-12);
                        compared++;
                    }
                    brg_schedule_sim_destroy(sim);
                    brg_schedule_destroy(s);
                }
            }
    /* GPipe, 1F1B and ZB-H1 at every (p, m), interleaved where p divides m. */
    CHECK(compared > 3 * 8 * 16);
    /* The ordering the issue expects at p = 4, m = 8: ZB-H1 < interleaved < 1F1B = GPipe. */
    CHECK(expected_bubble(BRG_SCHEDULE_ZB_H1, 4, 8, 1) < expected_bubble(BRG_SCHEDULE_INTERLEAVED, 4, 8, 2));
    CHECK(expected_bubble(BRG_SCHEDULE_INTERLEAVED, 4, 8, 2) < expected_bubble(BRG_SCHEDULE_1F1B, 4, 8, 1));
}

/* ---- files ---- */

static char tmpdir[256];

static const char *tmp_path(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", tmpdir, name);
    return buf;
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = '\0';
    fclose(f);
    return buf;
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* A small well-formedness check: tags nest and close, attribute values are
 * quoted, no raw '<' in text or attributes, every '&' starts an entity.
 * Returns 1 if well-formed; prints where it is not. */
static int xml_well_formed(const char *x)
{
    char stack[64][32];
    int depth = 0, roots = 0;
    const char *p = x;
    if (strncmp(p, "<?xml", 5) == 0) {
        p = strstr(p, "?>");
        if (!p) return 0;
        p += 2;
    }
    while (*p) {
        if (*p == '&') {
            const char *semi = strchr(p, ';');
            if (!semi || semi - p > 8 || semi == p + 1) {
                fprintf(stderr, "bad entity at %.20s\n", p);
                return 0;
            }
            p = semi + 1;
            continue;
        }
        if (*p == '>') {
            p++; /* a '>' in text is allowed */
            continue;
        }
        if (*p != '<') {
            p++;
            continue;
        }
        const int closing = p[1] == '/';
        const char *name = p + 1 + closing;
        size_t len = strcspn(name, " \t\n/>");
        if (len == 0 || len >= 32) {
            fprintf(stderr, "bad tag at %.30s\n", p);
            return 0;
        }
        const char *q = name + len;
        /* attributes: name="value" */
        while (*q && *q != '>' && !(q[0] == '/' && q[1] == '>')) {
            if (*q == '"') {
                const char *end = strchr(q + 1, '"');
                if (!end || memchr(q + 1, '<', (size_t)(end - q - 1))) {
                    fprintf(stderr, "bad attribute at %.40s\n", q);
                    return 0;
                }
                q = end + 1;
            } else if (*q == '<') {
                fprintf(stderr, "'<' inside a tag at %.40s\n", q);
                return 0;
            } else {
                q++;
            }
        }
        if (!*q) return 0;
        const int self_closing = q[0] == '/';
        if (closing) {
            if (depth == 0 || strlen(stack[depth - 1]) != len || strncmp(stack[depth - 1], name, len) != 0) {
                fprintf(stderr, "unmatched </%.*s>\n", (int)len, name);
                return 0;
            }
            depth--;
        } else if (!self_closing) {
            if (depth == 0) roots++;
            if (depth == 64) return 0;
            memcpy(stack[depth], name, len);
            stack[depth][len] = '\0';
            depth++;
        } else if (depth == 0) {
            roots++;
        }
        p = q + (self_closing ? 2 : 1);
    }
    if (depth != 0 || roots != 1) fprintf(stderr, "depth %d, roots %d at the end\n", depth, roots);
    return depth == 0 && roots == 1;
}

static const char *kind_name(brg_action_type t)
{
    static const char *const names[] = {"forward",         "backward",        "backward-input", "weight-gradient",
                                        "send-activation", "recv-activation", "send-gradient",  "recv-gradient"};
    return names[t];
}

/* The Chrome trace of (s, sim) at unit costs: every action once, times in
 * trace milliseconds, one named track per device. */
static void check_chrome(const brg_schedule *s, const brg_schedule_sim *sim, const char *path)
{
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    CHECK_MSG(root != NULL, "%s: %s at line %d", path, err.text, err.line);
    if (!root) return;
    json_t *events = json_object_get(root, "traceEvents");
    CHECK(json_is_array(events));
    const int p = brg_schedule_devices(s);
    int total = 0;
    for (int d = 0; d < p; d++) total += brg_schedule_action_count(s, d);
    int *seen = calloc((size_t)total, sizeof *seen);
    int *offset = calloc((size_t)p + 1, sizeof *offset);
    for (int d = 0; d < p; d++) offset[d + 1] = offset[d] + brg_schedule_action_count(s, d);
    int names = 0, slices = 0, bad = 0;
    size_t k;
    json_t *e;
    json_array_foreach(events, k, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!ph || !name) {
            bad++;
            continue;
        }
        if (strcmp(ph, "M") == 0 && strcmp(name, "thread_name") == 0) {
            names++;
            continue;
        }
        if (strcmp(ph, "X") != 0) continue;
        slices++;
        const int d = (int)json_integer_value(json_object_get(e, "tid"));
        json_t *args = json_object_get(e, "args");
        const int mb = (int)json_integer_value(json_object_get(args, "micro_batch"));
        const int chunk = (int)json_integer_value(json_object_get(args, "chunk"));
        if (d < 0 || d >= p || !json_is_integer(json_object_get(args, "micro_batch"))) {
            bad++;
            continue;
        }
        /* Find the action this slice is: kind, micro-batch and chunk are
         * unique on a device. */
        int found = -1;
        for (int i = 0; i < brg_schedule_action_count(s, d); i++) {
            const brg_action *a = brg_schedule_action(s, d, i);
            if (a->micro_batch == mb && a->chunk == chunk && strcmp(kind_name(a->type), name) == 0) found = i;
        }
        if (found < 0) {
            bad++;
            continue;
        }
        seen[offset[d] + found]++;
        const double ts = json_number_value(json_object_get(e, "ts"));
        const double dur = json_number_value(json_object_get(e, "dur"));
        if (fabs(ts - sim->start[d][found] * 1e3) > 1e-6 || fabs(ts + dur - sim->end[d][found] * 1e3) > 1e-6) bad++;
    }
    CHECK_MSG(bad == 0, "%s: %d slices without a matching action or with wrong times", path, bad);
    CHECK_MSG(names == p, "%s: %d thread names for %d devices", path, names, p);
    CHECK_MSG(slices == total, "%s: %d slices for %d actions", path, slices, total);
    int once = 1;
    for (int i = 0; i < total; i++) once &= seen[i] == 1;
    CHECK_MSG(once, "%s: an action is missing or appears twice", path);
    free(seen);
    free(offset);
    json_decref(root);
}

static void check_svg(const brg_schedule *s, const char *path)
{
    char *text = read_all(path);
    CHECK_MSG(text != NULL, "cannot read %s", path);
    if (!text) return;
    CHECK_MSG(xml_well_formed(text), "%s is not well-formed XML", path);
    CHECK(strstr(text, "<svg xmlns=\"http://www.w3.org/2000/svg\"") != NULL);
    const int p = brg_schedule_devices(s);
    CHECK_MSG(count_of(text, "<g class=\"row\"") == p, "%s: %d rows for %d devices", path,
              count_of(text, "<g class=\"row\""), p);
    int total = 0;
    for (int d = 0; d < p; d++) {
        const int n = brg_schedule_action_count(s, d);
        total += n;
        for (int i = 0; i < n; i++) {
            char key[64];
            snprintf(key, sizeof key, "data-device=\"%d\" data-index=\"%d\" ", d, i);
            CHECK_MSG(count_of(text, key) == 1, "%s: action %d of device %d appears %d times", path, i, d,
                      count_of(text, key));
        }
    }
    CHECK(count_of(text, "<rect class=\"action ") == total);
    free(text);
}

static void test_writers(void)
{
    static const struct {
        brg_schedule_kind kind;
        int p, m, v;
    } cases[] = {
        {BRG_SCHEDULE_GPIPE, 4, 8, 1},
        {BRG_SCHEDULE_1F1B, 4, 8, 1},
        {BRG_SCHEDULE_INTERLEAVED, 4, 8, 2},
        {BRG_SCHEDULE_ZB_H1, 4, 8, 1},
        {BRG_SCHEDULE_1F1B, 1, 3, 1},
        {BRG_SCHEDULE_INTERLEAVED, 1, 2, 2}, /* hand-overs in place: no messages */
    };
    const char *names[] = {"dev \"0\" <a&b>", "cpu:1", NULL, "cpu:3"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        brg_schedule *s = NULL;
        brg_schedule_sim *sim = simulate_unit(cases[c].kind, cases[c].p, cases[c].m, cases[c].v, &s);
        CHECK(sim != NULL);
        if (!sim) {
            brg_schedule_destroy(s);
            continue;
        }
        char title[64], json_path[512], svg_path[512];
        snprintf(title, sizeof title, "%s <p=%d> & m=%d", brg_schedule_kind_name(cases[c].kind), cases[c].p,
                 cases[c].m);
        brg_timeline t = {s, (const double *const *)sim->start, (const double *const *)sim->end, "unit", title,
                          cases[c].p == 4 ? names : NULL};
        snprintf(title, sizeof title, "t%zu.trace.json", c);
        tmp_path(title, json_path, sizeof json_path);
        snprintf(title, sizeof title, "t%zu.svg", c);
        tmp_path(title, svg_path, sizeof svg_path);
        CHECK_OK(brg_timeline_write_chrome(&t, json_path));
        CHECK_OK(brg_timeline_write_svg(&t, svg_path));
        check_chrome(s, sim, json_path);
        check_svg(s, svg_path);
        if (c == 0) {
            /* Escaped names and title. */
            char *text = read_all(svg_path);
            CHECK(text && strstr(text, "dev &quot;0&quot; &lt;a&amp;b&gt;") != NULL);
            CHECK(text && strstr(text, "device 2") != NULL);
            free(text);
            /* Seconds: the trace counts microseconds. */
            t.time_unit = "s";
            CHECK_OK(brg_timeline_write_chrome(&t, json_path));
            json_t *root = json_load_file(json_path, 0, NULL);
            json_t *events = json_object_get(root, "traceEvents");
            double last_end = 0.0;
            size_t k;
            json_t *e;
            json_array_foreach(events, k, e) {
                if (strcmp(json_string_value(json_object_get(e, "ph")), "X") != 0) continue;
                const double end = json_number_value(json_object_get(e, "ts")) +
                                   json_number_value(json_object_get(e, "dur"));
                if (end > last_end) last_end = end;
            }
            CHECK_NEAR(last_end, sim->makespan * 1e6, 1e-6);
            json_decref(root);
            /* Nanoseconds (each unit 2.5 ns): the picture says ns, not "0.0025 us". */
            {
                double *tiny[2][4];
                for (int d = 0; d < 4; d++)
                    for (int se = 0; se < 2; se++) {
                        const double *from = se ? sim->end[d] : sim->start[d];
                        tiny[se][d] = malloc((size_t)sim->action_count[d] * sizeof(double));
                        for (int i = 0; tiny[se][d] && i < sim->action_count[d]; i++) tiny[se][d][i] = from[i] * 2.5e-9;
                    }
                brg_timeline tt = t;
                tt.start = (const double *const *)tiny[0];
                tt.end = (const double *const *)tiny[1];
                CHECK_OK(brg_timeline_write_svg(&tt, svg_path));
                char *svg = read_all(svg_path);
                CHECK_MSG(svg && strstr(svg, ": forward, micro-batch 0, chunk 0, at 0 s for 2.5 ns</title>"), "%.300s",
                          svg ? svg : "");
                CHECK(svg && strstr(svg, "fill=\"#333\">20 ns</text>") != NULL); /* an axis tick (82.5 ns in all) */
                CHECK(svg && strstr(svg, " us") == NULL && strstr(svg, "e-0") == NULL);
                free(svg);
                for (int d = 0; d < 4; d++) free(tiny[0][d]), free(tiny[1][d]);
            }
            /* Bad timelines. */
            t.time_unit = "hours";
            CHECK_STATUS(brg_timeline_write_svg(&t, svg_path), BRG_ERR_INVALID_ARGUMENT);
            t.time_unit = "unit";
            const double saved = sim->end[1][2];
            sim->end[1][2] = sim->start[1][2] - 0.5;
            CHECK_STATUS(brg_timeline_write_chrome(&t, json_path), BRG_ERR_INVALID_ARGUMENT);
            CHECK_ERROR_HAS("action 2 of device 1");
            sim->end[1][2] = NAN;
            CHECK_STATUS(brg_timeline_write_svg(&t, svg_path), BRG_ERR_INVALID_ARGUMENT);
            sim->end[1][2] = saved;
            brg_timeline none = t;
            none.start = NULL;
            CHECK_STATUS(brg_timeline_write_svg(&none, svg_path), BRG_ERR_INVALID_ARGUMENT);
            CHECK_STATUS(brg_timeline_write_chrome(NULL, json_path), BRG_ERR_INVALID_ARGUMENT);
            /* Unwritable path: the path and the reason. */
            CHECK_STATUS(brg_timeline_write_svg(&t, "/nonexistent-brigade-dir/x.svg"), BRG_ERR_IO);
            CHECK_ERROR_HAS("/nonexistent-brigade-dir/x.svg");
            CHECK_STATUS(brg_timeline_write_chrome(&t, "/nonexistent-brigade-dir/x.json"), BRG_ERR_IO);
        }
        remove(json_path);
        remove(svg_path);
        brg_schedule_sim_destroy(sim);
        brg_schedule_destroy(s);
    }
}

static void test_memory_chart(void)
{
    brg_memory_bar bars[3] = {
        {"cpu:0", 64u << 20, 40u << 20, 41u << 20, 10u << 20, 63753420}, /* 5% headroom */
        {"cpu:1", 64u << 20, 30u << 20, 0, 0, 0},
        {"<cpu:2>", 32u << 20, 0, 35u << 20, 5u << 20, 32u << 20}, /* above capacity: still drawn; no headroom */
    };
    char path[512];
    tmp_path("memory.svg", path, sizeof path);
    CHECK_OK(brg_memory_chart_write_svg("peaks & capacity", bars, 3, path));
    char *text = read_all(path);
    CHECK(text != NULL);
    if (text) {
        CHECK(xml_well_formed(text));
        CHECK(count_of(text, "<g class=\"device\"") == 3);
        CHECK(count_of(text, "<rect class=\"planned\"") == 2);
        CHECK(count_of(text, "<rect class=\"measured\"") == 2);
        CHECK(count_of(text, "<line class=\"capacity\"") == 3);
        /* the headroom's line where there is one, and in the legend */
        CHECK(count_of(text, "<line class=\"budget\"") == 1);
        CHECK(strstr(text, "<title>capacity less headroom 60.80 MiB</title>") != NULL);
        CHECK(strstr(text, ">capacity less headroom</text>") != NULL);
        CHECK(strstr(text, "&lt;cpu:2&gt;") != NULL);
        CHECK(strstr(text, "peaks &amp; capacity") != NULL);
        CHECK(strstr(text, ">planned peak<") && strstr(text, ">measured peak<"));
    }
    free(text);
    remove(path);
    /* Planned peaks only (a simulated bench): the legend names no measured
     * peak, which nothing draws. */
    const brg_memory_bar planned_only[1] = {{"cpu:0", 64u << 20, 40u << 20, 0, 10u << 20, 0}};
    CHECK_OK(brg_memory_chart_write_svg("simulated", planned_only, 1, path));
    text = read_all(path);
    CHECK(text != NULL);
    if (text) {
        CHECK(xml_well_formed(text));
        CHECK(strstr(text, ">planned peak<") != NULL);
        CHECK_MSG(strstr(text, "measured") == NULL, "%s", text);
        CHECK_MSG(strstr(text, "headroom") == NULL, "%s", text);
    }
    free(text);
    remove(path);
    bars[1].capacity = 0;
    CHECK_STATUS(brg_memory_chart_write_svg("x", bars, 3, path), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_memory_chart_write_svg("x", bars, 0, path), BRG_ERR_INVALID_ARGUMENT);
    bars[1].capacity = 1;
    CHECK_STATUS(brg_memory_chart_write_svg("x", bars, 3, "/nonexistent-brigade-dir/m.svg"), BRG_ERR_IO);
}

/* The plan's times through the simulator give the plan's own step time;
 * forward times are positive on every virtual stage, transfers zero when
 * links are free. */
static void test_plan_times(void)
{
    brg_model *model = NULL;
    CHECK_OK(brg_zoo_build("fmnist-cnn", NULL, &model));
    if (!model) return;
    brg_device_spec specs[2];
    int n = 0;
    CHECK_OK(brg_device_spec_parse("2x64MiB", specs, 2, &n));
    for (int k = 0; k < BRG_SCHEDULE_KIND_COUNT; k++) {
        if (k == BRG_SCHEDULE_INTERLEAVED) continue; /* 4 blocks: 2 devices x 2 chunks still fit, below */
        for (int free_links = 0; free_links <= 1; free_links++) {
            brg_plan_options o = brg_plan_options_init();
            o.devices = specs;
            o.n_devices = n;
            o.batch = 8;
            o.micro_batches = 4;
            o.schedule = (brg_schedule_kind)k;
            o.link_bytes_per_s = free_links ? 0.0 : 1e9;
            o.verify = 0;
            brg_plan *plan = NULL;
            CHECK_OK(brg_plan_create(model, &o, &plan));
            if (!plan) continue;
            brg_schedule_times t;
            CHECK_OK(brg_plan_schedule_times(plan, &t));
            brg_schedule_sim *sim = NULL;
            CHECK_OK(brg_schedule_simulate(brg_plan_schedule(plan), &t, &sim));
            const brg_plan_info *in = brg_plan_get_info(plan);
            CHECK(sim && sim->makespan == in->step_s && sim->bubble == in->bubble);
            CHECK(t.forward[0] > 0.0 && t.forward[1] > 0.0 && t.backward_input[1] > 0.0);
            CHECK(free_links ? t.transfer[0] == 0.0 : t.transfer[0] > 0.0);
            brg_schedule_sim_destroy(sim);
            brg_plan_destroy(plan);
        }
    }
    brg_plan_options o = brg_plan_options_init();
    o.devices = specs;
    o.n_devices = n;
    o.batch = 8;
    o.schedule = BRG_SCHEDULE_INTERLEAVED;
    o.verify = 0;
    brg_plan *plan = NULL;
    CHECK_OK(brg_plan_create(model, &o, &plan));
    brg_schedule_times t;
    if (plan) {
        CHECK_OK(brg_plan_schedule_times(plan, &t));
        /* p * v = 4 virtual stages, each with work. */
        for (int j = 0; j < 4; j++) CHECK(t.forward[j] > 0.0);
    }
    brg_plan_destroy(plan);
    CHECK_STATUS(brg_plan_schedule_times(NULL, &t), BRG_ERR_INVALID_ARGUMENT);
    /* Nothing fits in 1 MiB: no partition, no times. */
    CHECK_OK(brg_device_spec_parse("2x1MiB", specs, 2, &n));
    o.schedule = BRG_SCHEDULE_1F1B;
    o.explain = 0;
    plan = NULL;
    CHECK_OK(brg_plan_create(model, &o, &plan));
    if (plan) {
        CHECK(!brg_plan_get_info(plan)->partitioned);
        CHECK_STATUS(brg_plan_schedule_times(plan, &t), BRG_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_HAS("no partition");
    }
    brg_plan_destroy(plan);
    brg_model_destroy(model);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/brigade-trace-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "cannot create a temporary directory\n");
        return 1;
    }
    test_analytic_bubbles();
    test_writers();
    test_memory_chart();
    test_plan_times();
    rmdir(tmpdir);
    TEST_EXIT();
}
