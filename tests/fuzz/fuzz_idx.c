/* libFuzzer target: the IDX readers (images and labels, gzip or plain) on
 * arbitrary bytes, through a file as the API reads them. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "brigade.h"

static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) snprintf(path, sizeof path, "/tmp/brigade-fuzz-idx-%ld", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size && fwrite(data, 1, size, f) != size) {
        fclose(f);
        return 0;
    }
    fclose(f);
    int64_t count = 0;
    int h = 0, w = 0;
    float *images = NULL;
    int32_t *labels = NULL;
    if (brg_idx_read_images(path, &count, &h, &w, &images) == BRG_OK) {
        if (count < 0 || h < 1 || w < 1) __builtin_trap();
        for (int64_t i = 0; i < count * h * w; i++)
            if (!(images[i] >= 0.0f && images[i] <= 1.0f)) __builtin_trap();
    }
    brg_free(images);
    if (brg_idx_read_labels(path, &count, &labels) == BRG_OK)
        for (int64_t i = 0; i < count; i++)
            if (labels[i] < 0 || labels[i] > 255) __builtin_trap();
    brg_free(labels);
    unlink(path);
    return 0;
}
