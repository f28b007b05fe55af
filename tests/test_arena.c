/* Arenas: the cap is enforced, in-use and peak are exact, freed blocks
 * coalesce, and the out-of-memory message carries its context. */
#include <pthread.h>
#include <stdint.h>

#include "testutil.h"

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;
static uint64_t next_rand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_cap_and_message(void)
{
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("cpu:3", 1 << 20, &a));
    if (!a) return;
    size_t off = 0;
    CHECK_OK(brg_arena_alloc(a, 600 * 1024, "stage 1 / mixed2 / weights", &off));
    CHECK(off == 0);
    CHECK_STATUS(brg_arena_alloc(a, 3 << 20, "stage 2 / mixed5 / activations", &off), BRG_ERR_OUT_OF_MEMORY);
    CHECK_ERROR_HAS("cpu:3");                          /* the device */
    CHECK_ERROR_HAS("stage 2 / mixed5 / activations"); /* the tag */
    CHECK_ERROR_HAS("3.00 MiB");                       /* bytes requested */
    CHECK_ERROR_HAS("424.00 KiB");                     /* bytes free */
    CHECK_ERROR_HAS("stage 1 / mixed2 / weights");     /* who holds the memory */
    /* Exactly the rest fits; one more unit does not. */
    CHECK_OK(brg_arena_alloc(a, (1 << 20) - 600 * 1024, "rest", &off));
    CHECK(brg_arena_in_use(a) == brg_arena_capacity(a));
    CHECK_STATUS(brg_arena_alloc(a, 1, "one byte", &off), BRG_ERR_OUT_OF_MEMORY);
    CHECK_ERROR_HAS("0 B");
    brg_arena_destroy(a);

    CHECK_STATUS(brg_arena_create("tiny", 10, &a), BRG_ERR_INVALID_ARGUMENT);
    CHECK(a == NULL);
}

static void test_rounding_and_peak(void)
{
    CHECK(brg_arena_rounded(0) == BRG_ARENA_ALIGN);
    CHECK(brg_arena_rounded(1) == BRG_ARENA_ALIGN);
    CHECK(brg_arena_rounded(256) == 256);
    CHECK(brg_arena_rounded(257) == 512);

    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("peak", 1 << 16, &a));
    if (!a) return;
    size_t o1, o2, o3;
    CHECK_OK(brg_arena_alloc(a, 1000, "a", &o1)); /* 1024 */
    CHECK_OK(brg_arena_alloc(a, 3000, "b", &o2)); /* 3072 */
    CHECK(brg_arena_in_use(a) == 4096 && brg_arena_peak(a) == 4096);
    CHECK_OK(brg_arena_free(a, o1));
    CHECK(brg_arena_in_use(a) == 3072 && brg_arena_peak(a) == 4096);
    CHECK_OK(brg_arena_alloc(a, 256, "c", &o3));
    CHECK(brg_arena_in_use(a) == 3328 && brg_arena_peak(a) == 4096);
    brg_arena_reset_peak(a);
    CHECK(brg_arena_peak(a) == 3328);
    CHECK_OK(brg_arena_free(a, o2));
    CHECK_OK(brg_arena_free(a, o3));
    CHECK(brg_arena_in_use(a) == 0 && brg_arena_peak(a) == 3328);
    /* Offsets are aligned. */
    CHECK(o1 % BRG_ARENA_ALIGN == 0 && o2 % BRG_ARENA_ALIGN == 0 && o3 % BRG_ARENA_ALIGN == 0);
    /* Bad frees are reported, not ignored. */
    CHECK_STATUS(brg_arena_free(a, o2), BRG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(brg_arena_free(a, 12345), BRG_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_HAS("12345");
    brg_arena_destroy(a);
}

static void test_coalescing(void)
{
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("frag", 4 * 4096, &a));
    if (!a) return;
    size_t off[4];
    for (int i = 0; i < 4; i++) CHECK_OK(brg_arena_alloc(a, 4096, "block", &off[i]));
    CHECK(brg_arena_free_blocks(a) == 0);
    CHECK(brg_arena_live_blocks(a) == 4);
    CHECK_OK(brg_arena_free(a, off[0]));
    CHECK_OK(brg_arena_free(a, off[2]));
    CHECK(brg_arena_free_blocks(a) == 2);
    CHECK(brg_arena_largest_free(a) == 4096);
    /* 8 KiB are free but not in one piece. */
    size_t o;
    CHECK_STATUS(brg_arena_alloc(a, 8192, "fragmented", &o), BRG_ERR_OUT_OF_MEMORY);
    CHECK_ERROR_HAS("largest free block 4.00 KiB");
    /* Freeing the middle block merges three extents into one. */
    CHECK_OK(brg_arena_free(a, off[1]));
    CHECK(brg_arena_free_blocks(a) == 1);
    CHECK(brg_arena_largest_free(a) == 3 * 4096);
    CHECK_OK(brg_arena_alloc(a, 3 * 4096, "merged", &o));
    CHECK(o == 0);
    CHECK_OK(brg_arena_free(a, o));
    CHECK_OK(brg_arena_free(a, off[3]));
    CHECK(brg_arena_free_blocks(a) == 1 && brg_arena_largest_free(a) == brg_arena_capacity(a));
    brg_arena_destroy(a);
}

/* brg_arena_alloc_within (ceiling 0) grants a block only within the peak so far
 * and where one free extent holds it; refusing changes nothing, granting
 * never raises the peak, and the free extents after its free are as
 * before. */
static void test_under_peak(void)
{
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("under", 8 * 4096, &a));
    if (!a) return;
    size_t o1 = 0, o2 = 0, o = 99;
    int granted = -1;
    /* A fresh arena has held nothing: nothing is granted. */
    CHECK_OK(brg_arena_alloc_within(a, 256, 0, "w", &o, &granted));
    CHECK(granted == 0 && o == 99 && brg_arena_in_use(a) == 0 && brg_arena_peak(a) == 0);
    CHECK_OK(brg_arena_alloc(a, 4 * 4096, "held", &o1));
    CHECK_OK(brg_arena_alloc(a, 4096, "kept", &o2));
    CHECK_OK(brg_arena_free(a, o1)); /* in use 4 KiB, peak 20 KiB, free: [0, 16K) and [20K, 32K) */
    /* Exactly the room under the peak (16 KiB), then one byte more. */
    CHECK_OK(brg_arena_alloc_within(a, 4 * 4096, 0, "w", &o, &granted));
    CHECK(granted == 1 && o == 0 && brg_arena_in_use(a) == 5 * 4096 && brg_arena_peak(a) == 5 * 4096);
    CHECK_OK(brg_arena_free(a, o));
    CHECK_OK(brg_arena_alloc_within(a, 4 * 4096 + 1, 0, "w", &o, &granted));
    CHECK(granted == 0 && brg_arena_in_use(a) == 4096 && brg_arena_peak(a) == 5 * 4096);
    CHECK(brg_arena_live_blocks(a) == 1 && brg_arena_free_blocks(a) == 2);
    brg_arena_destroy(a);
    /* Room under the peak, but in no single free extent: eight blocks
     * held at once, every other one freed. */
    CHECK_OK(brg_arena_create("under-frag", 8 * 4096, &a));
    if (!a) return;
    size_t off[8];
    for (int i = 0; i < 8; i++) CHECK_OK(brg_arena_alloc(a, 4096, "block", &off[i]));
    for (int i = 0; i < 8; i += 2) CHECK_OK(brg_arena_free(a, off[i]));
    CHECK_OK(brg_arena_alloc_within(a, 2 * 4096, 0, "w", &o, &granted));
    CHECK(granted == 0 && brg_arena_in_use(a) == 4 * 4096 && brg_arena_free_blocks(a) == 4);
    CHECK_OK(brg_arena_alloc_within(a, 4096, 0, "w", &o, &granted));
    CHECK(granted == 1 && o == off[0] && brg_arena_peak(a) == 8 * 4096);
    CHECK_OK(brg_arena_free(a, o));
    CHECK(brg_arena_free_blocks(a) == 4 && brg_arena_in_use(a) == 4 * 4096);
    brg_arena_destroy(a);
    /* A ceiling instead of the peak so far: granted up to it, on a fresh
     * arena too (the peak then rises to the block, never past the
     * ceiling), refused one byte past it, and past the capacity never. */
    CHECK_OK(brg_arena_create("ceiling", 8 * 4096, &a));
    if (!a) return;
    CHECK_OK(brg_arena_alloc_within(a, 3 * 4096, 3 * 4096, "w", &o, &granted));
    CHECK(granted == 1 && brg_arena_peak(a) == 3 * 4096);
    CHECK_OK(brg_arena_free(a, o));
    CHECK_OK(brg_arena_alloc_within(a, 3 * 4096 + 1, 3 * 4096, "w", &o, &granted));
    CHECK(granted == 0 && brg_arena_in_use(a) == 0);
    CHECK_OK(brg_arena_alloc_within(a, 9 * 4096, 16 * 4096, "w", &o, &granted));
    CHECK(granted == 0 && brg_arena_peak(a) == 3 * 4096);
    CHECK_OK(brg_arena_alloc(a, 4096, "held", &o1));
    CHECK_OK(brg_arena_alloc_within(a, 4096, 4096, "w", &o, &granted)); /* in use at the ceiling already */
    CHECK(granted == 0);
    CHECK_OK(brg_arena_alloc(a, 4096, "more", &o2)); /* in use past the ceiling: no wrap-around */
    CHECK_OK(brg_arena_alloc_within(a, 256, 4096, "w", &o, &granted));
    CHECK(granted == 0 && brg_arena_in_use(a) == 2 * 4096);
    CHECK_OK(brg_arena_free(a, o2));
    CHECK_OK(brg_arena_free(a, o1));
    brg_arena_destroy(a);
}

/* Random allocations and frees against a plain model: in-use equals the sum
 * of live rounded sizes, peak is the running maximum, blocks never overlap,
 * and an empty arena is one free extent again. */
static void test_random_against_model(void)
{
    enum { SLOTS = 64, STEPS = 4000 };
    const size_t cap = 1 << 20;
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("model", cap, &a));
    if (!a) return;
    size_t off[SLOTS], size[SLOTS];
    int live[SLOTS] = {0};
    size_t in_use = 0, peak = 0;
    int mismatches = 0, overlaps = 0, bad_oom = 0;
    for (int step = 0; step < STEPS; step++) {
        int s = (int)(next_rand() % SLOTS);
        if (live[s]) {
            if (brg_arena_free(a, off[s]) != BRG_OK) mismatches++;
            in_use -= size[s];
            live[s] = 0;
        } else {
            size_t want = 1 + next_rand() % 40000;
            brg_status st = brg_arena_alloc(a, want, "random", &off[s]);
            if (st == BRG_OK) {
                size[s] = brg_arena_rounded(want);
                live[s] = 1;
                in_use += size[s];
                if (in_use > peak) peak = in_use;
                for (int j = 0; j < SLOTS; j++)
                    if (j != s && live[j] && off[j] < off[s] + size[s] && off[s] < off[j] + size[j]) overlaps++;
                if (off[s] + size[s] > cap) overlaps++;
            } else if (st != BRG_ERR_OUT_OF_MEMORY || brg_arena_largest_free(a) >= brg_arena_rounded(want)) {
                bad_oom++;
            }
        }
        if (brg_arena_in_use(a) != in_use || brg_arena_peak(a) != peak) mismatches++;
    }
    CHECK(mismatches == 0);
    CHECK(overlaps == 0);
    CHECK(bad_oom == 0);
    CHECK(peak > cap / 4); /* the walk really exercised the arena */
    for (int s = 0; s < SLOTS; s++)
        if (live[s]) CHECK_OK(brg_arena_free(a, off[s]));
    CHECK(brg_arena_in_use(a) == 0);
    CHECK(brg_arena_free_blocks(a) == 1);
    CHECK(brg_arena_largest_free(a) == cap);
    brg_arena_destroy(a);
}

static void *hammer(void *arg)
{
    brg_arena *a = arg;
    for (int i = 0; i < 2000; i++) {
        size_t o;
        if (brg_arena_alloc(a, 512 + (size_t)(i % 7) * 256, "thread", &o) == BRG_OK) brg_arena_free(a, o);
    }
    return NULL;
}

static void test_threads(void)
{
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("shared", 1 << 20, &a));
    if (!a) return;
    pthread_t t[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, hammer, a) == 0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK(brg_arena_in_use(a) == 0);
    CHECK(brg_arena_free_blocks(a) == 1);
    CHECK(brg_arena_peak(a) >= 512);
    brg_arena_destroy(a);
}

static void test_sizes(void)
{
    size_t b = 0;
    CHECK_OK(brg_parse_bytes("512", &b));
    CHECK(b == 512);
    CHECK_OK(brg_parse_bytes("8MiB", &b));
    CHECK(b == 8u << 20);
    CHECK_OK(brg_parse_bytes("12GiB", &b));
    CHECK(b == (size_t)12 << 30);
    CHECK_OK(brg_parse_bytes("1.5GiB", &b));
    CHECK(b == (size_t)3 << 29);
    CHECK_OK(brg_parse_bytes("100MB", &b));
    CHECK(b == 100000000u);
    CHECK_OK(brg_parse_bytes("4KiB", &b));
    CHECK(b == 4096);
    const char *bad[] = {"", "MiB", "-1MiB", "0", "0.1", "12 GiB", "12Gib", "1e400", "nan", "+5MiB", "5MiBs",
                         "0x10GiB", "0X1p4MiB"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_STATUS(brg_parse_bytes(bad[i], &b), BRG_ERR_INVALID_ARGUMENT);
    char buf[32];
    CHECK(strcmp(brg_format_bytes(512, buf, sizeof buf), "512 B") == 0);
    CHECK(strcmp(brg_format_bytes(8u << 20, buf, sizeof buf), "8.00 MiB") == 0);
    CHECK(strcmp(brg_format_bytes((size_t)12 << 30, buf, sizeof buf), "12.00 GiB") == 0);
}

int main(void)
{
    test_cap_and_message();
    test_rounding_and_peak();
    test_coalescing();
    test_under_peak();
    test_random_against_model();
    test_threads();
    test_sizes();
    TEST_EXIT();
}
