/* The progress displays: training's line, and counted progress (see progress.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "brigade.h"
#include "progress.h"

#define BAR_WIDTH 24

double brg_progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void brg_progress_init(brg_progress *p, int epochs)
{
    memset(p, 0, sizeof *p);
    p->epochs = epochs;
    if (brg_world_launched()) {
        /* mpirun gives rank 0 a terminal of its own whatever its own
         * output is (a log file, most often): lines, not redraws. */
        p->out = stdout;
        p->interactive = 0;
    } else if (isatty(STDERR_FILENO)) {
        p->out = stderr;
        p->interactive = 1;
    } else {
        p->out = stdout;
        p->interactive = isatty(STDOUT_FILENO);
    }
}

void brg_progress_begin_epoch(brg_progress *p, int epoch, int64_t steps)
{
    p->epoch = epoch;
    p->steps = steps > 0 ? steps : 1;
    p->next_tenth = 1;
    p->start = brg_progress_now();
    p->last_draw = 0.0;
}

/* Most devices shown one by one; more are summed up by the fullest. */
#define MAX_SHOWN 8

/* Each device's memory against its capacity, compact: "41/64M 4.2/8M"
 * (the capacity's unit, no decimals that do not help); beyond MAX_SHOWN
 * devices, the fullest one only. */
static void format_memory(char *buf, size_t size, const brg_progress_state *s)
{
    size_t len = 0;
    buf[0] = '\0';
    if (s->devices > MAX_SHOWN) {
        int worst = 0;
        for (int d = 1; d < s->devices; d++)
            if ((double)s->mem_peak[d] / (double)s->mem_cap[d] >
                (double)s->mem_peak[worst] / (double)s->mem_cap[worst])
                worst = d;
        snprintf(buf, size, "fullest of %d: %d at %.0f%%", s->devices, worst,
                 100.0 * (double)s->mem_peak[worst] / (double)s->mem_cap[worst]);
        return;
    }
    for (int d = 0; d < s->devices && len < size; d++) {
        const double cap = (double)s->mem_cap[d];
        const char *unit = "K";
        double scale = 1024.0;
        if (cap >= 1024.0 * 1024.0 * 1024.0) {
            unit = "G";
            scale = 1024.0 * 1024.0 * 1024.0;
        } else if (cap >= 1024.0 * 1024.0) {
            unit = "M";
            scale = 1024.0 * 1024.0;
        }
        const double used = (double)s->mem_peak[d] / scale;
        len += (size_t)snprintf(buf + len, size - len, "%s%.*f/%.3g%s", d ? " " : "", used < 10.0 ? 1 : 0, used,
                                cap / scale, unit);
    }
}

void brg_progress_update(brg_progress *p, const brg_progress_state *s)
{
    const double now = brg_progress_now();
    const int last = s->step >= p->steps;
    /* A terminal's line at most ten times a second (the last step always),
     * else a plain line at each tenth of the epoch that the step reaches;
     * a step that shows nothing formats nothing. */
    const int tenth = (int)(10 * s->step / p->steps);
    if (p->interactive ? !last && now - p->last_draw < 0.1 : tenth < p->next_tenth) return;
    const double elapsed = now - p->start;
    const double rate = elapsed > 0.0 ? (double)s->samples / elapsed : 0.0;
    char mem[MAX_SHOWN * 24];
    format_memory(mem, sizeof mem, s);

    if (p->interactive) {
        p->last_draw = now;
        char bar[BAR_WIDTH + 1];
        int filled = (int)(BAR_WIDTH * s->step / p->steps);
        for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < filled ? '#' : '.';
        bar[BAR_WIDTH] = '\0';
        /* \r to the start of the line, \033[K to erase what a longer
         * previous line left behind. */
        fprintf(p->out,
                "\repoch %d/%d  %lld/%lld [%s] loss %.4f  acc %5.1f%%  %.0f samples/s  data wait %.0f%%  mem %s\033[K",
                p->epoch, p->epochs, (long long)s->step, (long long)p->steps, bar, s->loss, 100.0 * s->accuracy,
                rate, 100.0 * s->data_wait, mem);
        fflush(p->out);
        p->drawn = 1;
        return;
    }
    p->next_tenth = tenth + 1;
    fprintf(p->out,
            "  epoch %d/%d step %lld/%lld (%d%%): loss %.4f, acc %.1f%%, %.0f samples/s, data wait %.0f%%, mem %s\n",
            p->epoch, p->epochs, (long long)s->step, (long long)p->steps, 10 * tenth, s->loss, 100.0 * s->accuracy,
            rate, 100.0 * s->data_wait, mem);
    fflush(p->out);
}

void brg_progress_clear(brg_progress *p)
{
    if (p->interactive && p->drawn) {
        fprintf(p->out, "\r\033[K");
        fflush(p->out);
    }
    p->drawn = 0;
}

brg_count_progress brg_count_progress_start(void)
{
    /* Under mpirun rank 0's terminal is mpirun's, shared with the log. */
    return (brg_count_progress){!brg_world_launched() && isatty(STDERR_FILENO), 0, -1.0};
}

void brg_count_progress_show(brg_count_progress *p, const char *doing, int64_t done, int64_t count, const char *unit)
{
    if (!p->on) return;
    const double now = brg_progress_now();
    if (done < count && p->drawn && now - p->last < 0.1) return;
    fprintf(stderr, "\r\033[K%s: %lld of %lld %s", doing, (long long)done, (long long)count, unit);
    fflush(stderr);
    p->drawn = 1;
    p->last = now;
}

void brg_count_progress_clear(brg_count_progress *p)
{
    if (!p->drawn) return;
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
    p->drawn = 0;
}
