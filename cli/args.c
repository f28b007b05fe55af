/* brigade command line: what the commands share about their arguments:
 * messages, numbers and comma lists (see cli.h). bench/gpu/gpu_bench
 * compiles this file too, with its own program name. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli-lib.h"

const char *brg_cli_program = "brigade";

static void verror(const char *cmd, const char *fmt, va_list ap)
{
    if (cmd) fprintf(stderr, "%s %s: ", brg_cli_program, cmd);
    else fprintf(stderr, "%s: ", brg_cli_program);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void brg_cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(cmd, fmt, ap);
    va_end(ap);
}

int brg_cli_fail(const char *what, brg_status status)
{
    const char *msg = brg_last_error();
    fprintf(stderr, "%s %s: %s\n", brg_cli_program, what, msg[0] ? msg : brg_status_string(status));
    return status == BRG_ERR_INVALID_ARGUMENT ? BRG_EXIT_USAGE : BRG_EXIT_FAILURE;
}

static int try_help(const char *cmd)
{
    if (cmd) fprintf(stderr, "Try '%s %s --help'.\n", brg_cli_program, cmd);
    else fprintf(stderr, "Try '%s --help'.\n", brg_cli_program);
    return BRG_EXIT_USAGE;
}

int brg_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(cmd, fmt, ap);
    va_end(ap);
    return try_help(cmd);
}

/* Long options are whole arguments; a short one may sit inside a cluster
 * ("-xo"), so it is named by optopt. */
int brg_cli_bad_option(const char *cmd, int c, char **argv)
{
    const char *arg = argv[optind - 1];
    if (c == ':') brg_cli_error(cmd, "option '%s' needs a value", arg);
    else if (strncmp(arg, "--", 2) == 0 && strchr(arg, '='))
        brg_cli_error(cmd, "unknown option '%s', or it does not take a value", arg);
    else if (strncmp(arg, "--", 2) == 0 || optopt <= 0 || optopt >= 256) brg_cli_error(cmd, "unknown option '%s'", arg);
    else brg_cli_error(cmd, "unknown option '-%c'", optopt);
    return try_help(cmd);
}

int brg_cli_finish_stdout(const char *cmd, int code)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        brg_cli_error(cmd, "cannot write to standard output");
        return BRG_EXIT_FAILURE;
    }
    return code;
}

/* Decimal digits with an optional '-': no '+', no spaces, nothing after. */
int brg_cli_parse_int(const char *cmd, const char *name, const char *text, int64_t min, int64_t max, int64_t *value)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (text[0] == '\0' || text[0] == '+' || end == text || *end != '\0' || errno || v < min || v > max) {
        brg_cli_error(cmd, "%s '%s' must be a whole number from %lld to %lld", name, text, (long long)min,
                      (long long)max);
        return 0;
    }
    *value = v;
    return 1;
}

/* Optionally ending in '%' (then divided by 100) when percent is allowed. */
int brg_cli_parse_real(const char *cmd, const char *name, const char *text, int percent, double *value)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (percent && end != text && *end == '%' && end[1] == '\0') {
        v /= 100.0;
        end++;
    }
    /* strtod also reads hexadecimal ("0x1p-2" is 0.25): decimal only */
    const int hex = strchr(text, 'x') || strchr(text, 'X');
    if (text[0] == '\0' || end == text || *end != '\0' || errno || !isfinite(v) || hex) {
        brg_cli_error(cmd, "%s '%s' is not a number", name, text);
        return 0;
    }
    *value = v == 0.0 ? 0.0 : v; /* "-0" is 0, and must not come back as "-0%" in what is printed */
    return 1;
}

/* The divisors in pairs (d, batch / d) up to the square root: a batch
 * of 2^24 takes 4096 steps, not 2^24, and has fewer than 1024 such pairs. */
int brg_cli_check_divides(const char *cmd, const char *name, int64_t count, int64_t batch)
{
    if (count >= 1 && batch % count == 0) return 1;
    int64_t below_root[1024];
    int n = 0;
    for (int64_t d = 1; d * d <= batch && n < 1024; d++)
        if (batch % d == 0) below_root[n++] = d;
    const int paired = below_root[n - 1] * below_root[n - 1] == batch ? 2 * n - 1 : 2 * n;
    char list[512];
    size_t len = 0;
    int shown = 0;
    for (; shown < paired && len + 24 < sizeof list; shown++) {
        const int64_t d = shown < n ? below_root[shown] : batch / below_root[paired - 1 - shown];
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%lld", shown ? ", " : "", (long long)d);
    }
    brg_cli_error(cmd, "%s %lld does not divide --batch %lld into equal micro-batches; the divisors of %lld: %s%s",
                  name, (long long)count, (long long)batch, (long long)batch, list, shown < paired ? ", ..." : "");
    return 0;
}

/* Empty items are an error, not skipped. */
int brg_cli_parse_list(const char *cmd, const char *name, const char *text, const char *expected, void *ctx,
                       int (*take)(void *ctx, const char *item))
{
    const size_t len = strlen(text);
    if (len == 0 || text[0] == ',' || text[len - 1] == ',' || strstr(text, ",,")) {
        brg_cli_error(cmd, "%s '%s': expected %s", name, text, expected);
        return 0;
    }
    char *copy = malloc(len + 1);
    if (!copy) {
        brg_cli_error(cmd, "out of host memory");
        return 0;
    }
    memcpy(copy, text, len + 1);
    int ok = 1;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && ok; item = strtok_r(NULL, ",", &save)) ok = take(ctx, item);
    free(copy);
    return ok;
}

/* ---- paths ---- */

void brg_cli_resolve_path(const char *path, char *out, size_t size)
{
    char p[PATH_MAX], prefix[PATH_MAX], real[PATH_MAX];
    snprintf(p, sizeof p, "%s", path && *path ? path : ".");
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = '\0';
    /* The longest leading part p[0, cut) that is there, resolved, then the
     * names after it as given (a loop: one name fewer each time). */
    for (size_t cut = n;;) {
        if (cut) snprintf(prefix, sizeof prefix, "%.*s", (int)cut, p);
        else snprintf(prefix, sizeof prefix, ".");
        if (realpath(prefix, real)) {
            /* the missing names, without empty and "." ones */
            size_t at = strcmp(real, "/") == 0 ? 0 : strlen(real);
            snprintf(out, size, "%s", at ? real : "/");
            for (const char *name = p + cut; *name;) {
                const size_t len = strcspn(name, "/");
                if (len && !(len == 1 && name[0] == '.') && at < size)
                    at += (size_t)snprintf(out + at, size - at, "/%.*s", (int)len, name);
                name += len;
                while (*name == '/') name++;
            }
            return;
        }
        if (cut == 0) { /* not even the working folder resolves */
            snprintf(out, size, "%s", p);
            return;
        }
        while (cut > 0 && p[cut - 1] != '/') cut--; /* the last name */
        while (cut > 1 && p[cut - 1] == '/') cut--; /* its slashes, but a leading "/" */
    }
}

int brg_cli_same_path(const char *a, const char *b)
{
    if (!a || !b) return 0;
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char ra[PATH_MAX], rb[PATH_MAX];
    brg_cli_resolve_path(a, ra, sizeof ra);
    brg_cli_resolve_path(b, rb, sizeof rb);
    return strcmp(ra, rb) == 0;
}

int brg_cli_path_within(const char *path, const char *folder)
{
    if (!path || !folder) return 0;
    char rp[PATH_MAX], rf[PATH_MAX];
    brg_cli_resolve_path(path, rp, sizeof rp);
    brg_cli_resolve_path(folder, rf, sizeof rf);
    const size_t n = strcmp(rf, "/") == 0 ? 0 : strlen(rf);
    return strncmp(rp, rf, n) == 0 && (rp[n] == '/' || rp[n] == '\0');
}

/* Up to the last 5 bytes of buf: an escape (4) and the NUL. */
const char *brg_cli_shown(const char *s, char *buf, size_t size, int *width)
{
    size_t at = 0;
    int chars = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p && at + 5 < size) {
        /* The length of a valid UTF-8 sequence at p (0: not one). */
        int len = *p < 0x80 ? 1 : *p >= 0xc2 && *p <= 0xdf ? 2 : *p >= 0xe0 && *p <= 0xef ? 3
                                : *p >= 0xf0 && *p <= 0xf4 ? 4 : 0;
        for (int k = 1; k < len; k++)
            if ((p[k] & 0xc0) != 0x80) len = 0;
        if (len == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))) len = 0;
        if (len == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))) len = 0;
        if (len == 1 && (*p < 0x20 || *p == 0x7f)) len = 0;
        if (len) {
            memcpy(buf + at, p, (size_t)len);
            at += (size_t)len;
            p += len;
            chars++;
        } else {
            const int n = *p == '\n' ? snprintf(buf + at, size - at, "\\n")
                          : *p == '\t' ? snprintf(buf + at, size - at, "\\t")
                                       : snprintf(buf + at, size - at, "\\x%02x", *p);
            at += (size_t)n;
            chars += n;
            p++;
        }
    }
    buf[at] = '\0';
    if (width) *width = chars;
    return buf;
}
