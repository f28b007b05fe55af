/* brigade bench: the ranking, the table, the JSON and the progress lines
 * of the combinations cmd_bench.c ran. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "plan_print.h"

/* The spread of a combination's measured makespans (longest less
 * shortest, over their mean) above which the report calls the machine
 * noisy: a prediction checked to 10% needs steps steadier than that. */
#define NOISY_STEPS 0.10

/* Where the plans' times came from: the first combination that planned
 * says (the same for all of them). */
static brg_plan_times plan_times(const combo *cs, int n)
{
    for (int i = 0; i < n; i++)
        if (cs[i].predicted > 0) return cs[i].times;
    return BRG_PLAN_TIMES_FLOPS;
}

/* Where the predicted column's times came from (the same for every plan
 * of a run), into buf. */
static const char *times_text(const run_ctx *x, const combo *cs, int n, char *buf, size_t size)
{
    char speed[32];
    switch (plan_times(cs, n)) {
    case BRG_PLAN_TIMES_PROFILE: return "from the profile";
    case BRG_PLAN_TIMES_MEASURED: return "measured per layer on this CPU, --profile auto";
    case BRG_PLAN_TIMES_CALIBRATED: return "this CPU's calibrated speed per layer kind";
    default:
        snprintf(buf, size, "the cost model's FLOPs at %s per device, %s",
                 brg_cli_format_speed(x->a->numbers.device_flops, speed, sizeof speed),
                 x->a->speed_given ? "--device-speed" : "assumed: --device-speed sets it");
        return buf;
    }
}

static const char *const mode_names[] = {"measured", "simulated", "unit"};

const char *brg_bench_note(const combo *c) { return c->note ? c->note : ""; }

int brg_bench_ranked(const combo *c, mode md) { return c->fits || (md != MODE_MEASURED && c->makespan > 0.0); }

const char *brg_bench_combo_name(const combo *c, char *buf, size_t size)
{
    /* the V-shapes always run 2 chunks: their names say so */
    if (c->kind == BRG_SCHEDULE_INTERLEAVED)
        snprintf(buf, size, "%s-v%d-m%d", brg_schedule_kind_name(c->kind), c->chunks, c->m);
    else snprintf(buf, size, "%s-m%d", brg_schedule_kind_name(c->kind), c->m);
    return buf;
}

const char *brg_bench_schedule_label(const combo *c, char *buf, size_t size)
{
    if (c->kind == BRG_SCHEDULE_INTERLEAVED)
        snprintf(buf, size, "%s (v=%d)", brg_schedule_kind_name(c->kind), c->chunks);
    else snprintf(buf, size, "%s", brg_schedule_kind_name(c->kind));
    return buf;
}

/* qsort has no context argument. */
static mode sort_mode;

static int cmp_combo(const void *pa, const void *pb)
{
    const combo *a = pa, *b = pb;
    if (a->fits != b->fits) return b->fits - a->fits;
    if (sort_mode == MODE_UNIT) {
        if (a->bubble != b->bubble) return a->bubble < b->bubble ? -1 : 1;
        return a->makespan < b->makespan ? -1 : a->makespan > b->makespan;
    }
    if (a->samples_per_s != b->samples_per_s) return a->samples_per_s > b->samples_per_s ? -1 : 1;
    return 0;
}

/* The widest brg_format_bytes below 1 TiB, "1023.99 KiB": byte columns
 * this wide line up whatever their unit. */
#define BYTES_W 11

/* Bytes as a row's last column, padded when a fit mark follows so that the
 * marks line up. */
static void print_bytes_mark(size_t bytes, const char *mark)
{
    char b[32];
    brg_format_bytes(bytes, b, sizeof b);
    if (mark[0]) printf("%-*s  %s\n", BYTES_W, b, mark);
    else printf("%s\n", b);
}

/* A time for the table; "-" where there is none. */
static char *fmt_time(double s, char *buf, size_t size)
{
    if (s > 0.0) return brg_cli_format_time(s, buf, size);
    snprintf(buf, size, "-");
    return buf;
}

static size_t max_peak(const combo *c, int p, int measured)
{
    size_t m = 0;
    for (int d = 0; d < p; d++) {
        size_t v = measured ? c->stages[d].peak_measured : c->stages[d].peak_planned;
        if (v > m) m = v;
    }
    return m;
}

void brg_bench_print_table(const run_ctx *x, const combo *cs, int n)
{
    const int p = x->p;
    char name[64], b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    if (x->md == MODE_UNIT) {
        printf("%d stage%s at unit costs (F = B = W = 1; an unsplit backward takes 2), best first\n\n", p,
               p == 1 ? "" : "s");
        printf("%4s  %-20s  %5s  %9s  %8s  %10s  %s\n", "rank", "schedule", "M", "makespan", "bubble", "analytic",
               "activations");
        for (int i = 0; i < n; i++) {
            const combo *c = &cs[i];
            char an[32] = "-";
            if (!isnan(c->analytic)) snprintf(an, sizeof an, "%.2f%%", 100.0 * c->analytic);
            brg_bench_schedule_label(c, name, sizeof name);
            if (!brg_bench_ranked(c, x->md)) {
                printf("%4s  %-20s  %5d  %s\n", "-", name, c->m, brg_bench_note(c));
                continue;
            }
            printf("%4d  %-20s  %5d  %9.6g  %7.2f%%  %10s  %11.4g\n", i + 1, name, c->m, c->makespan,
                   100.0 * c->bubble, an, c->peak_activations);
        }
        printf("\nactivations: the most micro-batches' activations a device holds at once, in micro-batches of one\n"
               "stage (a chunk's count 1/chunks): 1F1B's is the number of stages, or M when fewer\n");
        return;
    }
    const int measured = x->md == MODE_MEASURED;
    const int ranks = brg_world_size(brg_cli_world);
    char over[48] = "";
    if (measured && ranks > 1) snprintf(over, sizeof over, " over %d processes (mpirun)", ranks);
    printf("%s on %d device%s%s, batch %lld, %s, best first\n\n", brg_model_name(x->model), p, p == 1 ? "" : "s",
           over, (long long)x->a->batch, measured ? "measured" : "simulated (nothing ran)");
    if (measured)
        printf("%4s  %-20s  %4s  %10s  %9s  %9s  %9s  %9s  %7s  %s\n", "rank", "schedule", "M", "samples/s", "step",
               "makespan", "replayed", "predicted", "bubble", "peak measured / planned (largest stage)");
    else
        printf("%4s  %-20s  %4s  %10s  %9s  %7s  %s\n", "rank", "schedule", "M", "samples/s", "makespan", "bubble",
               "planned peak (largest stage)");
    for (int i = 0; i < n; i++) {
        const combo *c = &cs[i];
        char rate[32];
        brg_bench_schedule_label(c, name, sizeof name);
        if (!brg_bench_ranked(c, x->md)) {
            printf("%4s  %-20s  %4d  %s\n", "-", name, c->m, brg_bench_note(c));
            continue;
        }
        if (measured)
            printf("%4d  %-20s  %4d  %10s  %9s  %9s  %9s  %9s  %6.1f%%  %*s / %s\n", i + 1, name, c->m,
                   brg_cli_format_rate(c->samples_per_s, rate, sizeof rate), fmt_time(c->step_s, b1, sizeof b1),
                   fmt_time(c->makespan, b2, sizeof b2),
                   fmt_time(c->replayed, b3, sizeof b3), fmt_time(c->predicted, b4, sizeof b4), 100.0 * c->bubble,
                   BYTES_W, brg_format_bytes(max_peak(c, p, 1), b5, sizeof b5),
                   brg_format_bytes(max_peak(c, p, 0), b6, sizeof b6));
        else {
            printf("%4d  %-20s  %4d  %10s  %9s  %6.1f%%  ", i + 1, name, c->m,
                   brg_cli_format_rate(c->samples_per_s, rate, sizeof rate), fmt_time(c->makespan, b2, sizeof b2),
                   100.0 * c->bubble);
            print_bytes_mark(max_peak(c, p, 0), c->fit);
        }
    }
    for (int i = 0, header = 0; i < n; i++) {
        const combo *c = &cs[i];
        if (!brg_bench_ranked(c, x->md)) continue;
        if (!header++)
            printf("\nper stage: bubble, peak %s, capacity%s\n", measured ? "measured / planned" : "planned",
                   measured ? ", sends' copy time per step and the share hidden behind computation" : "");
        brg_bench_combo_name(c, name, sizeof name);
        for (int d = 0; d < p; d++) {
            const stage_row *r = &c->stages[d];
            if (measured)
                printf("  %-22s %3d  %6.1f%%  %*s / %-*s  of %-*s  %9s %5.1f%% hidden\n", d ? "" : name, d,
                       100.0 * r->bubble, BYTES_W, brg_format_bytes(r->peak_measured, b1, sizeof b1), BYTES_W,
                       brg_format_bytes(r->peak_planned, b2, sizeof b2), BYTES_W,
                       brg_format_bytes(r->capacity, b3, sizeof b3), fmt_time(r->copy_s, b4, sizeof b4),
                       r->copy_s > 0 ? 100.0 * r->copy_hidden_s / r->copy_s : 0.0);
            else {
                printf("  %-22s %3d  %6.1f%%  %*s  of ", d ? "" : name, d, 100.0 * r->bubble, BYTES_W,
                       brg_format_bytes(r->peak_planned, b2, sizeof b2));
                print_bytes_mark(r->capacity, r->fit);
            }
        }
    }
    if (measured && brg_bench_ranked(&cs[0], x->md)) { /* ranked first: nothing ran, nothing to explain */
        char text[128];
        printf("\nstep: wall time per step (optimizer included); makespan: first action start to last action end;\n"
               "replayed: the simulator with this run's mean action times; predicted: the simulator with the\n"
               "plan's times (%s).\nSee docs/bench.md.\n",
               times_text(x, cs, n, text, sizeof text));
        double sum = 0.0;
        int k = 0;
        for (int i = 0; i < n; i++)
            if (cs[i].gflops > 0) {
                sum += cs[i].gflops;
                k++;
            }
        if (k && plan_times(cs, n) == BRG_PLAN_TIMES_FLOPS)
            printf("The devices computed at %.3g GFLOP/s on average (the cost model's FLOPs over the busy time):\n"
                   "--device-speed %.3g makes the predicted column a prediction for this machine.\n", sum / k,
                   sum / k);
        /* How far off the plan was, as a ratio people can check a target
         * against: the prediction leaves the optimizer out, the step has it. */
        double lo = INFINITY, hi = 0.0, spread = 0.0;
        for (int i = 0; i < n; i++)
            if (brg_bench_ranked(&cs[i], x->md) && cs[i].predicted > 0 && cs[i].makespan > 0) {
                const double r = cs[i].predicted / cs[i].makespan;
                lo = r < lo ? r : lo;
                hi = r > hi ? r : hi;
                const double v = (cs[i].makespan_hi - cs[i].makespan_lo) / cs[i].makespan;
                spread = v > spread ? v : spread;
            }
        if (hi > 0 && lo == hi) printf("predicted / measured makespan: %.3g\n", lo);
        else if (hi > 0) printf("predicted / measured makespan: %.3g to %.3g over the combinations\n", lo, hi);
        /* A ratio is only as good as the run it divides by: say when the
         * machine's own noise is of the size of the question. */
        if (hi > 0 && spread > NOISY_STEPS)
            printf("(the measured steps' makespans spread over %.0f%% of their mean%s: this machine is noisy; a\n"
                   "ratio from more --steps, or the median of several runs, says more)\n",
                   100.0 * spread, n > 1 ? " in a combination" : "");
    }
}

/* A JSON number, or null when it is not finite. */
static void json_num(const char *key, double v, const char *sep)
{
    if (isfinite(v)) printf("\"%s\": %.17g%s", key, v, sep);
    else printf("\"%s\": null%s", key, sep);
}

static void json_str(const char *key, const char *v, const char *sep)
{
    printf("\"%s\": \"", key);
    for (const unsigned char *c = (const unsigned char *)v; *c; c++) {
        if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if (*c < 0x20) printf("\\u%04x", *c);
        else putchar(*c);
    }
    printf("\"%s", sep);
}

void brg_bench_print_json(const run_ctx *x, const combo *cs, int n)
{
    const int p = x->p;
    printf("{");
    json_str("mode", mode_names[x->md], ", ");
    if (x->model) json_str("model", brg_model_name(x->model), ", ");
    printf("\"stages\": %d, ", p);
    if (x->md != MODE_UNIT) printf("\"batch\": %lld, ", (long long)x->a->batch);
    if (x->md == MODE_MEASURED)
        printf("\"steps\": %lld, \"warmup\": %lld, \"processes\": %d, ", (long long)x->a->steps,
               (long long)x->a->warmup, brg_world_size(brg_cli_world));
    printf("\"results\": [");
    for (int i = 0; i < n; i++) {
        const combo *c = &cs[i];
        if (brg_bench_ranked(c, x->md)) printf("%s\n  {\"rank\": %d, ", i ? "," : "", i + 1);
        else printf("%s\n  {\"rank\": null, ", i ? "," : "");
        json_str("schedule", brg_schedule_kind_name(c->kind), ", ");
        printf("\"chunks\": %d, \"microbatches\": %d, \"fits\": %s, ", c->chunks, c->m, c->fits ? "true" : "false");
        if (c->note) json_str("note", c->note, ", ");
        if (!brg_bench_ranked(c, x->md)) {
            printf("\"stage_results\": []}"); /* nothing ran */
            continue;
        }
        json_num("makespan", c->makespan, ", ");
        json_num("bubble_fraction", c->bubble, ", ");
        json_num("peak_activations", c->peak_activations, ", ");
        if (x->md == MODE_UNIT) {
            json_num("analytic_bubble_fraction", c->analytic, ", ");
        } else {
            json_num("samples_per_s", c->samples_per_s, ", ");
            json_num("predicted_makespan", c->predicted, ", ");
            if (x->md == MODE_MEASURED) {
                json_num("measured_makespan", c->makespan, ", ");
                json_num("measured_makespan_min", c->makespan_lo, ", ");
                json_num("measured_makespan_max", c->makespan_hi, ", ");
                json_num("measured_makespan_median", c->makespan_median, ", ");
                json_num("step_seconds", c->step_s, ", ");
                json_num("replayed_makespan", c->replayed, ", ");
                json_num("effective_gflops", c->gflops, ", ");
                printf("\"host_bytes_per_step\": %llu, ", (unsigned long long)c->host_bytes);
            }
        }
        if (c->files[1]) { /* written: the chrome trace and the timeline */
            printf("\"trace\": {");
            json_str("chrome", c->files[0], ", ");
            json_str("svg", c->files[1], c->files[2] ? ", " : "");
            if (c->files[2]) json_str("memory_svg", c->files[2], "");
            printf("}, ");
        }
        printf("\"stage_results\": [");
        for (int d = 0; d < p; d++) {
            const stage_row *r = &c->stages[d];
            printf("%s{\"stage\": %d, ", d ? ", " : "", d);
            json_num("bubble_fraction", r->bubble, x->md == MODE_UNIT ? "" : ", ");
            if (x->md == MODE_MEASURED) {
                printf("\"peak_measured_bytes\": %zu, ", r->peak_measured);
                json_num("copy_seconds", r->copy_s, ", ");
                json_num("copy_hidden_seconds", r->copy_hidden_s, ", ");
            }
            if (x->md != MODE_UNIT)
                printf("\"peak_planned_bytes\": %zu, \"capacity_bytes\": %zu, \"fits\": %s, \"arena_bytes\": %zu",
                       r->peak_planned, r->capacity, r->fits ? "true" : "false", r->arena_bytes);
            printf("}");
        }
        printf("]}");
    }
    printf("\n]}\n");
}

void brg_bench_rank(combo *cs, int n, mode md)
{
    sort_mode = md;
    qsort(cs, (size_t)n, sizeof *cs, cmp_combo);
}

void brg_bench_progress(const run_ctx *x, const combo *c, int i, int n)
{
    char name[64], b1[32], b2[32], b3[32];
    brg_bench_combo_name(c, name, sizeof name);
    char rate[32];
    if (!brg_bench_ranked(c, x->md))
        fprintf(stderr, "bench [%d/%d] %s: skipped: %s\n", i, n, name, brg_bench_note(c));
    else if (x->md == MODE_UNIT)
        fprintf(stderr, "bench [%d/%d] %s: makespan %g, bubble %.2f%%\n", i, n, name, c->makespan, 100.0 * c->bubble);
    else if (x->md == MODE_SIMULATED)
        fprintf(stderr, "bench [%d/%d] %s: %s samples/s, makespan %s, bubble %.1f%%%s%s%s\n", i, n, name,
                brg_cli_format_rate(c->samples_per_s, rate, sizeof rate), fmt_time(c->makespan, b1, sizeof b1),
                100.0 * c->bubble, c->fit[0] ? " (" : "", c->fit, c->fit[0] ? ")" : "");
    else
        fprintf(stderr, "bench [%d/%d] %s: %s samples/s, makespan %s measured, %s replayed, %s predicted\n", i, n,
                name, brg_cli_format_rate(c->samples_per_s, rate, sizeof rate), fmt_time(c->makespan, b1, sizeof b1),
                fmt_time(c->replayed, b2, sizeof b2), fmt_time(c->predicted, b3, sizeof b3));
}

