/* Status strings and the per-thread last-error message. */
#include <pthread.h>

#include "testutil.h"

static void *other_thread(void *arg)
{
    int *seen_empty = arg;
    /* The main thread's message must not leak into this thread. */
    *seen_empty = brg_last_error()[0] == '\0';
    size_t bytes;
    brg_parse_bytes("12 parsecs", &bytes);
    return NULL;
}

int main(void)
{
    /* Every status has its own non-empty name. */
    for (int i = 0; i < BRG_STATUS_COUNT; i++) {
        const char *s = brg_status_string((brg_status)i);
        CHECK(s != NULL && s[0] != '\0');
        for (int j = 0; j < i; j++) CHECK(strcmp(s, brg_status_string((brg_status)j)) != 0);
    }
    CHECK(strcmp(brg_status_string(BRG_OK), "ok") == 0);
    CHECK(strcmp(brg_status_string(BRG_ERR_OUT_OF_MEMORY), "out of memory") == 0);
    CHECK(strcmp(brg_status_string((brg_status)999), "unknown status") == 0);
    CHECK(strcmp(brg_status_string((brg_status)-1), "unknown status") == 0);

    /* A failing call leaves a message with its context; clearing forgets it. */
    brg_clear_error();
    CHECK(brg_last_error()[0] == '\0');
    size_t bytes = 0;
    CHECK_STATUS(brg_parse_bytes("8 furlongs", &bytes), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("8 furlongs");

    /* Messages are per thread. */
    int seen_empty = 0;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, &seen_empty) == 0);
    pthread_join(t, NULL);
    CHECK(seen_empty);
    CHECK_ERROR_HAS("8 furlongs"); /* the other thread's failure did not overwrite ours */

    brg_clear_error();
    CHECK(brg_last_error()[0] == '\0');
    CHECK(strlen(brg_version()) > 0);
    TEST_EXIT();
}
