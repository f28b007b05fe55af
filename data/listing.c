/* What class folders (folder.c) and segmentation folders (segfolder.c)
 * both use to read a folder tree and split it (folder-impl.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/internal.h"
#include "base/rng.h"
#include "folder-impl.h"

brg_status brg_names_add(brg_names *l, const char *s)
{
    if (l->n == l->cap) {
        const int64_t cap = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return brg_error(BRG_ERR_HOST_MEMORY, "image folder: out of host memory");
        l->v = v;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(s))) return brg_error(BRG_ERR_HOST_MEMORY, "image folder: out of host memory");
    l->n++;
    return BRG_OK;
}

void brg_names_free(brg_names *l)
{
    for (int64_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int by_strcmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int brg_is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0 || strcasecmp(dot, ".png") == 0);
}

brg_status brg_path_join(char *buf, size_t size, const char *a, const char *b)
{
    if ((size_t)snprintf(buf, size, "%s/%s", a, b) >= size)
        return brg_error(BRG_ERR_IO, "image folder: the path %s/%s is too long", a, b);
    return BRG_OK;
}

brg_status brg_list_dir(const char *dir, brg_names *files, brg_names *dirs)
{
    DIR *d = opendir(dir);
    if (!d) return brg_error(BRG_ERR_IO, "cannot read the folder %s: %s", dir, strerror(errno));
    brg_status st = BRG_OK;
    char path[4096];
    struct dirent *e;
    while (st == BRG_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if ((st = brg_path_join(path, sizeof path, dir, e->d_name)) != BRG_OK) break;
        struct stat sb;
        if (stat(path, &sb) != 0) {
            /* A dangling link or a file that vanished: a file that cannot be
             * read, reported when it is (if it is an image by name). */
            st = brg_names_add(files, e->d_name);
            continue;
        }
        st = brg_names_add(S_ISDIR(sb.st_mode) ? dirs : files, e->d_name);
    }
    closedir(d);
    if (files->n) qsort(files->v, (size_t)files->n, sizeof *files->v, by_strcmp);
    if (dirs->n) qsort(dirs->v, (size_t)dirs->n, sizeof *dirs->v, by_strcmp);
    return st;
}

void brg_split_group(int64_t *members, int64_t n, double fraction, uint64_t seed, uint64_t group, char *in_val)
{
    /* Fisher-Yates on a splitmix64 stream of (seed, group). */
    uint64_t state = brg_splitmix64(seed ^ brg_splitmix64(group));
    for (int64_t i = n - 1; i > 0; i--) {
        state = brg_splitmix64(state);
        const int64_t j = (int64_t)(state % (uint64_t)(i + 1));
        const int64_t t = members[i];
        members[i] = members[j];
        members[j] = t;
    }
    const int64_t nval = (int64_t)(fraction * (double)n + 0.5);
    for (int64_t i = 0; i < nval; i++) in_val[members[i]] = 1;
}
