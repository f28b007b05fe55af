/* Class folders of images, and a class or segmentation folder as a loader's
 * source of samples (see include/brigade/images.h). Reading folders and
 * splitting them is listing.c's, shared with segfolder.c. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/internal.h"
#include "brigade/images.h"
#include "folder-impl.h"

struct brg_image_folder {
    char *dir;
    brg_names classes;
    int64_t *class_count;
    brg_names paths;        /* every sample's path */
    int32_t *labels;
    brg_names ignored, why; /* files left out and the reason for each */
};

void brg_image_folder_destroy(brg_image_folder *f)
{
    if (!f) return;
    free(f->dir);
    brg_names_free(&f->classes);
    brg_names_free(&f->paths);
    brg_names_free(&f->ignored);
    brg_names_free(&f->why);
    free(f->class_count);
    free(f->labels);
    free(f);
}

static brg_status ignore(brg_image_folder *f, const char *path, const char *why)
{
    brg_status st = brg_names_add(&f->ignored, path);
    if (st == BRG_OK) st = brg_names_add(&f->why, why);
    return st;
}

/* A folder on the way down from the image folder: a link back to one of
 * them is a loop. */
typedef struct ancestor {
    dev_t dev;
    ino_t ino;
    const struct ancestor *up;
} ancestor;

/* The images below dir, recursively (at most 32 folders deep), as paths;
 * links are followed, but one back to a folder above it (up, the chain of
 * the folders it lies in) is left out and listed, not followed round. */
static brg_status scan_class(brg_image_folder *f, const char *dir, int depth, int32_t label, const ancestor *up)
{
    struct stat sb;
    if (stat(dir, &sb) != 0) return brg_error(BRG_ERR_IO, "cannot read the folder %s: %s", dir, strerror(errno));
    for (const ancestor *a = up; a; a = a->up)
        if (a->dev == sb.st_dev && a->ino == sb.st_ino)
            return ignore(f, dir, "a link back to a folder it lies in (a loop): not followed");
    if (depth > 32) return brg_error(BRG_ERR_FORMAT, "image folder: %s is more than 32 folders deep", dir);
    const ancestor here = {sb.st_dev, sb.st_ino, up};
    brg_names files = {0}, dirs = {0};
    brg_status st = brg_list_dir(dir, &files, &dirs);
    char path[4096];
    for (int64_t i = 0; st == BRG_OK && i < files.n; i++) {
        if ((st = brg_path_join(path, sizeof path, dir, files.v[i])) != BRG_OK) break;
        if (!brg_is_image_name(files.v[i])) {
            st = ignore(f, path, "not a .jpg, .jpeg or .png image");
            continue;
        }
        if ((st = brg_names_add(&f->paths, path)) != BRG_OK) break;
        int32_t *labels = realloc(f->labels, (size_t)f->paths.cap * sizeof *labels);
        if (!labels) {
            st = brg_error(BRG_ERR_HOST_MEMORY, "image folder: out of host memory");
            break;
        }
        f->labels = labels;
        f->labels[f->paths.n - 1] = label;
        f->class_count[label]++;
    }
    for (int64_t i = 0; st == BRG_OK && i < dirs.n; i++) {
        if ((st = brg_path_join(path, sizeof path, dir, dirs.v[i])) == BRG_OK)
            st = scan_class(f, path, depth + 1, label, &here);
    }
    brg_names_free(&files);
    brg_names_free(&dirs);
    return st;
}

brg_status brg_image_folder_open(const char *dir, brg_image_folder **out)
{
    if (!out || !dir) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_image_folder_open: NULL argument");
    *out = NULL;
    brg_image_folder *f = calloc(1, sizeof *f);
    if (!f || !(f->dir = strdup(dir))) {
        free(f);
        return brg_error(BRG_ERR_HOST_MEMORY, "image folder: out of host memory");
    }
    brg_names files = {0};
    brg_status st = brg_list_dir(dir, &files, &f->classes);
    if (st == BRG_OK && f->classes.n == 0) {
        int64_t images = 0;
        for (int64_t i = 0; i < files.n; i++) images += brg_is_image_name(files.v[i]);
        st = brg_error(BRG_ERR_FORMAT,
                       "%s holds no class folders%s: images go in one subfolder per class (%s/CLASS/NAME.jpg)", dir,
                       images ? " (it holds images directly)" : "", dir);
    }
    if (st == BRG_OK && f->classes.n > INT32_MAX)
        st = brg_error(BRG_ERR_FORMAT, "%s holds %lld class folders", dir, (long long)f->classes.n);
    if (st == BRG_OK && !(f->class_count = calloc((size_t)f->classes.n, sizeof *f->class_count)))
        st = brg_error(BRG_ERR_HOST_MEMORY, "image folder: out of host memory");
    struct stat sb;
    memset(&sb, 0, sizeof sb);
    if (st == BRG_OK && stat(dir, &sb) != 0)
        st = brg_error(BRG_ERR_IO, "cannot read the folder %s: %s", dir, strerror(errno));
    const ancestor top = {sb.st_dev, sb.st_ino, NULL};
    char path[4096];
    /* Images beside the class folders have no class: left out, and listed
     * (other files there, a README say, are not the data's). */
    for (int64_t i = 0; st == BRG_OK && i < files.n; i++)
        if (brg_is_image_name(files.v[i]) && (st = brg_path_join(path, sizeof path, dir, files.v[i])) == BRG_OK)
            st = ignore(f, path, "an image beside the class folders, in none of them: it has no class");
    for (int64_t k = 0; st == BRG_OK && k < f->classes.n; k++)
        if ((st = brg_path_join(path, sizeof path, dir, f->classes.v[k])) == BRG_OK)
            st = scan_class(f, path, 1, (int32_t)k, &top);
    brg_names_free(&files);
    if (st != BRG_OK) {
        brg_image_folder_destroy(f);
        return st;
    }
    *out = f;
    return BRG_OK;
}

const char *brg_image_folder_dir(const brg_image_folder *f) { return f ? f->dir : NULL; }
int brg_image_folder_classes(const brg_image_folder *f) { return f ? (int)f->classes.n : 0; }
int64_t brg_image_folder_count(const brg_image_folder *f) { return f ? f->paths.n : 0; }
int64_t brg_image_folder_ignored_count(const brg_image_folder *f) { return f ? f->ignored.n : 0; }

const char *brg_image_folder_class_name(const brg_image_folder *f, int k)
{
    return f && k >= 0 && k < f->classes.n ? f->classes.v[k] : NULL;
}

int64_t brg_image_folder_class_count(const brg_image_folder *f, int k)
{
    return f && k >= 0 && k < f->classes.n ? f->class_count[k] : 0;
}

const char *brg_image_folder_path(const brg_image_folder *f, int64_t i)
{
    return f && i >= 0 && i < f->paths.n ? f->paths.v[i] : NULL;
}

int32_t brg_image_folder_label(const brg_image_folder *f, int64_t i)
{
    return f && i >= 0 && i < f->paths.n ? f->labels[i] : -1;
}

const char *brg_image_folder_ignored(const brg_image_folder *f, int64_t i, const char **why)
{
    const int ok = f && i >= 0 && i < f->ignored.n;
    if (why) *why = ok ? f->why.v[i] : NULL;
    return ok ? f->ignored.v[i] : NULL;
}

/* A folder with the classes of f and the samples of f where keep[i] == want. */
static brg_status subset(const brg_image_folder *f, const char *keep, char want, brg_image_folder **out)
{
    brg_image_folder *g = calloc(1, sizeof *g);
    brg_status st = BRG_OK;
    if (!g || !(g->dir = strdup(f->dir)) || !(g->class_count = calloc((size_t)f->classes.n, sizeof *g->class_count)) ||
        !(g->labels = malloc((size_t)(f->paths.n ? f->paths.n : 1) * sizeof *g->labels)))
        st = brg_error(BRG_ERR_HOST_MEMORY, "image folder: out of host memory");
    for (int64_t k = 0; st == BRG_OK && k < f->classes.n; k++) st = brg_names_add(&g->classes, f->classes.v[k]);
    for (int64_t i = 0; st == BRG_OK && i < f->paths.n; i++) {
        if (keep[i] != want) continue;
        if ((st = brg_names_add(&g->paths, f->paths.v[i])) != BRG_OK) break;
        g->labels[g->paths.n - 1] = f->labels[i];
        g->class_count[f->labels[i]]++;
    }
    if (st != BRG_OK) {
        brg_image_folder_destroy(g);
        return st;
    }
    *out = g;
    return BRG_OK;
}

brg_status brg_image_folder_split(const brg_image_folder *f, double fraction, uint64_t seed,
                                  brg_image_folder **train, brg_image_folder **val)
{
    if (!f || !train || !val) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_image_folder_split: NULL argument");
    *train = *val = NULL;
    if (!(fraction > 0.0 && fraction < 1.0))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "the validation fraction %g is not between 0 and 1", fraction);
    char *in_val = calloc((size_t)(f->paths.n ? f->paths.n : 1), 1);
    int64_t *members = malloc((size_t)(f->paths.n ? f->paths.n : 1) * sizeof *members);
    if (!in_val || !members) {
        free(in_val);
        free(members);
        return brg_error(BRG_ERR_HOST_MEMORY, "image folder: out of host memory");
    }
    for (int64_t k = 0; k < f->classes.n; k++) {
        int64_t n = 0;
        for (int64_t i = 0; i < f->paths.n; i++)
            if (f->labels[i] == k) members[n++] = i;
        brg_split_group(members, n, fraction, seed, (uint64_t)k, in_val);
    }
    brg_status st = subset(f, in_val, 0, train);
    if (st == BRG_OK && (st = subset(f, in_val, 1, val)) != BRG_OK) {
        brg_image_folder_destroy(*train);
        *train = NULL;
    }
    free(in_val);
    free(members);
    return st;
}

/* ---- a folder as a source of samples ---- */

/* A class folder's samples, or a segmentation folder's (seg set): the same
 * skipping of bad files and the same list of them for both. */

typedef struct bad_file {
    const char *path; /* the file at fault (owned by the folder) */
    char *why;
} bad_file;

struct brg_image_source {
    const brg_image_folder *folder;
    const brg_seg_folder *seg;
    int classes;           /* seg: label values below it are classes */
    int32_t ignore_label;  /* seg: the one other value a mask may hold */
    int64_t count;
    const char *dir;
    brg_image_transform t;
    int skip_bad;
    brg_sample_source samples;
    pthread_mutex_t lock;
    char *is_bad;          /* per sample: known bad */
    bad_file *bad;
    int64_t n_bad, cap_bad;
    int64_t skipped;       /* reads that met a bad file since the last take */
};

/* Decode and transform sample i of a class folder. */
static brg_status load(const brg_image_source *s, int64_t i, uint64_t seed, float *image, int32_t *label,
                       const char **culprit)
{
    brg_image img;
    /* A JPEG may decode smaller, down to the shorter side the resize needs
     * (or the crop's longer side when there is no resize). */
    const int need = s->t.resize > 0 ? s->t.resize : (s->t.height > s->t.width ? s->t.height : s->t.width);
    *culprit = s->folder->paths.v[i];
    brg_status st = brg_image_read(s->folder->paths.v[i], s->t.channels, s->t.resize > 0 ? need : 0, &img);
    if (st != BRG_OK) return st;
    st = brg_image_transform_apply(&img, &s->t, seed, image);
    if (st != BRG_OK) brg_error_context(st, "%s", s->folder->paths.v[i]);
    brg_image_free(&img);
    if (st == BRG_OK) *label = s->folder->labels[i];
    return st;
}

/* Record sample i as bad (once), with the calling thread's message. */
static void mark_bad(brg_image_source *s, int64_t i, const char *culprit)
{
    pthread_mutex_lock(&s->lock);
    if (!s->is_bad[i]) {
        s->is_bad[i] = 1;
        if (s->n_bad == s->cap_bad) {
            const int64_t cap = s->cap_bad ? 2 * s->cap_bad : 16;
            bad_file *b = realloc(s->bad, (size_t)cap * sizeof *b);
            if (b) {
                s->bad = b;
                s->cap_bad = cap;
            }
        }
        if (s->n_bad < s->cap_bad) {
            s->bad[s->n_bad].path = culprit;
            s->bad[s->n_bad].why = strdup(brg_last_error());
            s->n_bad++;
        }
    }
    pthread_mutex_unlock(&s->lock);
}

static int known_bad(brg_image_source *s, int64_t i)
{
    pthread_mutex_lock(&s->lock);
    const int bad = s->is_bad[i];
    pthread_mutex_unlock(&s->lock);
    return bad;
}

/* Sample index, or with skip_bad the first readable one after it (in
 * folder order, wrapping), which then gives its own label(s). */
static brg_status read_sample(void *ctx, int64_t index, uint64_t seed, float *image, int32_t *label)
{
    brg_image_source *s = ctx;
    const int64_t n = s->count;
    for (int64_t tries = 0; tries < n; tries++) {
        const int64_t i = (index + tries) % n;
        if (known_bad(s, i)) continue;
        const char *culprit = NULL;
        const brg_status st = s->seg ? brg_seg_load(s->seg, i, &s->t, s->classes, s->ignore_label, seed, image, label,
                                                    &culprit)
                                     : load(s, i, seed, image, label, &culprit);
        if (st == BRG_OK) {
            if (tries > 0) {
                pthread_mutex_lock(&s->lock);
                s->skipped++;
                pthread_mutex_unlock(&s->lock);
            }
            return BRG_OK;
        }
        /* Only a bad file is skipped: out of memory or a transform that
         * cannot apply is the run's problem, not the file's. */
        if (!s->skip_bad || (st != BRG_ERR_FORMAT && st != BRG_ERR_IO)) return st;
        mark_bad(s, i, culprit);
    }
    return brg_error(BRG_ERR_FORMAT, "%s: none of its %lld %s can be read", s->dir, (long long)n,
                     s->seg ? "image and mask pairs" : "images");
}

/* The source of count samples under dir with transform t (checked). */
static brg_status source_new(int64_t count, const char *dir, const brg_image_transform *t, int skip_bad,
                             brg_image_source **out)
{
    *out = NULL;
    if (t->channels != 1 && t->channels != 3)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "image folders give 1 or 3 channels, not %d", t->channels);
    if (t->height <= 0 || t->width <= 0)
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "image source: a %dx%d input", t->height, t->width);
    brg_image_source *s = calloc(1, sizeof *s);
    if (!s || !(s->is_bad = calloc((size_t)(count ? count : 1), 1))) {
        free(s);
        return brg_error(BRG_ERR_HOST_MEMORY, "image source: out of host memory");
    }
    s->count = count;
    s->dir = dir;
    s->t = *t;
    s->skip_bad = skip_bad;
    pthread_mutex_init(&s->lock, NULL);
    s->samples.count = count;
    s->samples.sample_floats = (int64_t)t->channels * t->height * t->width;
    s->samples.label_count = 1;
    s->samples.read = read_sample;
    s->samples.ctx = s;
    *out = s;
    return BRG_OK;
}

brg_status brg_image_source_create(const brg_image_folder *folder, const brg_image_transform *t, int skip_bad,
                                   brg_image_source **out)
{
    if (!folder || !t || !out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_image_source_create: NULL argument");
    const brg_status st = source_new(folder->paths.n, folder->dir, t, skip_bad, out);
    if (st == BRG_OK) (*out)->folder = folder;
    return st;
}

brg_status brg_seg_source_create(const brg_seg_folder *folder, const brg_image_transform *t, int classes,
                                 int32_t ignore_label, int skip_bad, brg_image_source **out)
{
    if (!folder || !t || !out) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_seg_source_create: NULL argument");
    *out = NULL;
    if (classes < 1 || classes > 256)
        return brg_error(BRG_ERR_INVALID_ARGUMENT,
                         "segmentation source: %d classes; masks hold bytes, so 1 to 256 classes", classes);
    const brg_status st = source_new(brg_seg_folder_count(folder), brg_seg_folder_dir(folder), t, skip_bad, out);
    if (st != BRG_OK) return st;
    (*out)->seg = folder;
    (*out)->classes = classes;
    (*out)->ignore_label = ignore_label;
    (*out)->samples.label_count = (int64_t)t->height * t->width;
    return BRG_OK;
}

void brg_image_source_destroy(brg_image_source *s)
{
    if (!s) return;
    for (int64_t k = 0; k < s->n_bad; k++) free(s->bad[k].why);
    free(s->bad);
    free(s->is_bad);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

const brg_sample_source *brg_image_source_samples(const brg_image_source *s) { return s ? &s->samples : NULL; }

int64_t brg_image_source_bad_count(const brg_image_source *s)
{
    if (!s) return 0;
    pthread_mutex_lock((pthread_mutex_t *)&s->lock);
    const int64_t n = s->n_bad;
    pthread_mutex_unlock((pthread_mutex_t *)&s->lock);
    return n;
}

brg_status brg_image_source_bad(const brg_image_source *s, int64_t k, char *path, size_t path_size, char *why,
                                size_t why_size)
{
    if (!s) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_image_source_bad: source is NULL");
    brg_image_source *m = (brg_image_source *)s;
    pthread_mutex_lock(&m->lock);
    brg_status st = BRG_OK;
    if (k < 0 || k >= m->n_bad) {
        st = brg_error(BRG_ERR_INVALID_ARGUMENT, "bad file %lld of %lld", (long long)k, (long long)m->n_bad);
    } else {
        if (path && path_size) snprintf(path, path_size, "%s", m->bad[k].path ? m->bad[k].path : "");
        if (why && why_size) snprintf(why, why_size, "%s", m->bad[k].why ? m->bad[k].why : "");
    }
    pthread_mutex_unlock(&m->lock);
    return st;
}

int64_t brg_image_source_take_skipped(brg_image_source *s)
{
    if (!s) return 0;
    pthread_mutex_lock(&s->lock);
    const int64_t n = s->skipped;
    s->skipped = 0;
    pthread_mutex_unlock(&s->lock);
    return n;
}
