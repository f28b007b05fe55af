/* Minimal test helpers. Checks never use assert() (it vanishes under
 * NDEBUG): a failed check prints where and why and counts a failure, and
 * TEST_EXIT() returns 1 if anything failed. Exit 77 means "cannot run here". */
#ifndef BRIGADE_TESTUTIL_H
#define BRIGADE_TESTUTIL_H

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brigade.h"

static int test_failures = 0;
static int test_checks = 0;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        test_checks++;                                                                             \
        if (!(cond)) {                                                                             \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        test_checks++;                                                                             \
        if (!(cond)) {                                                                             \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* A call that must succeed; on failure print the library's message. */
#define CHECK_OK(call)                                                                             \
    do {                                                                                           \
        brg_status check_ok_st_ = (call);                                                          \
        test_checks++;                                                                             \
        if (check_ok_st_ != BRG_OK) {                                                              \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call,              \
                    brg_status_string(check_ok_st_), brg_last_error());                            \
        }                                                                                          \
    } while (0)

/* A call that must fail with the given status. */
#define CHECK_STATUS(call, want)                                                                   \
    do {                                                                                           \
        brg_status check_st_ = (call);                                                             \
        test_checks++;                                                                             \
        if (check_st_ != (want)) {                                                                 \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", __FILE__, __LINE__, #call, \
                    brg_status_string(check_st_), brg_status_string(want), brg_last_error());      \
        }                                                                                          \
    } while (0)

/* The last error message must contain text. */
#define CHECK_ERROR_HAS(text)                                                                      \
    CHECK_MSG(strstr(brg_last_error(), (text)) != NULL, "message \"%s\" lacks \"%s\"",             \
              brg_last_error(), (text))

#define CHECK_NEAR(a, b, tol)                                                                      \
    CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g (tolerance %g)", (double)(a), \
              (double)(b), (double)(tol))

/* Every test must have checked something; a test that asserts nothing is a
 * defect, so it fails. */
#define TEST_EXIT()                                                                                \
    do {                                                                                           \
        if (test_checks == 0) {                                                                    \
            fprintf(stderr, "no checks ran\n");                                                    \
            return 1;                                                                              \
        }                                                                                          \
        fprintf(stderr, "%d checks, %d failed\n", test_checks, test_failures);                     \
        return test_failures ? 1 : 0;                                                              \
    } while (0)

/* The threads of this process (/proc/self/task), -1 where unknown. */
static inline int test_thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* test_thread_count once no more than `expected` threads are left, or
 * after 2 s: the threads of an OpenMP pool that were told to end (their
 * thread ended, or a smaller team released them) may take a moment. */
static inline int test_settled_threads(int expected)
{
    int n = test_thread_count();
    for (int i = 0; i < 200 && n > expected; i++) {
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        n = test_thread_count();
    }
    return n;
}

#endif /* BRIGADE_TESTUTIL_H */
