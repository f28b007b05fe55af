/* Segmentation folders: DIR/images/NAME.{jpg,jpeg,png} beside
 * DIR/masks/NAME.png, paired by the name without its extension, and one
 * pair read, checked and transformed into a sample (see
 * include/brigade/images.h and docs/data.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/internal.h"
#include "brigade/images.h"
#include "folder-impl.h"

struct brg_seg_folder {
    char *dir;
    brg_names images, masks; /* pair i: images.v[i] and masks.v[i], in the images' name order */
    brg_names ignored, why;  /* files left out and the reason for each */
};

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int brg_seg_folder_detect(const char *dir)
{
    char a[4200], b[4200];
    if (!dir) return 0;
    snprintf(a, sizeof a, "%s/images", dir);
    snprintf(b, sizeof b, "%s/masks", dir);
    if (is_dir(a) && is_dir(b)) return 1;
    snprintf(a, sizeof a, "%s/train/images", dir);
    snprintf(b, sizeof b, "%s/train/masks", dir);
    return is_dir(a) && is_dir(b) ? 2 : 0;
}

void brg_seg_folder_destroy(brg_seg_folder *f)
{
    if (!f) return;
    free(f->dir);
    brg_names_free(&f->images);
    brg_names_free(&f->masks);
    brg_names_free(&f->ignored);
    brg_names_free(&f->why);
    free(f);
}

static brg_status ignore(brg_seg_folder *f, const char *dir, const char *name, const char *why)
{
    char path[4200];
    brg_status st = brg_path_join(path, sizeof path, dir, name);
    if (st == BRG_OK) st = brg_names_add(&f->ignored, path);
    if (st == BRG_OK) st = brg_names_add(&f->why, why);
    return st;
}

/* A file name without its extension, and its place in the listing. */
typedef struct stem {
    char *stem;
    int64_t index;
    int dup; /* another file of the folder has the same stem */
} stem;

static int by_stem(const void *a, const void *b)
{
    const stem *x = a, *y = b;
    const int c = strcmp(x->stem, y->stem);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* The stems of the names that pass keep(), sorted, duplicates flagged. */
static brg_status stems_of(const brg_names *files, int (*keep)(const char *), stem **out, int64_t *n)
{
    *out = calloc((size_t)(files->n ? files->n : 1), sizeof **out);
    *n = 0;
    if (!*out) return brg_error(BRG_ERR_HOST_MEMORY, "segmentation folder: out of host memory");
    for (int64_t i = 0; i < files->n; i++) {
        if (!keep(files->v[i])) continue;
        stem *s = &(*out)[(*n)++];
        if (!(s->stem = strdup(files->v[i]))) return brg_error(BRG_ERR_HOST_MEMORY, "segmentation folder: out of "
                                                                                   "host memory");
        char *dot = strrchr(s->stem, '.');
        if (dot) *dot = '\0';
        s->index = i;
    }
    if (*n) qsort(*out, (size_t)*n, sizeof **out, by_stem);
    for (int64_t i = 1; i < *n; i++)
        if (strcmp((*out)[i].stem, (*out)[i - 1].stem) == 0) (*out)[i].dup = (*out)[i - 1].dup = 1;
    return BRG_OK;
}

static void stems_free(stem *s, int64_t n)
{
    for (int64_t i = 0; s && i < n; i++) free(s[i].stem);
    free(s);
}

static int is_png_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && strcasecmp(dot, ".png") == 0;
}

/* Pair the files of images/ and masks/ (see brg_seg_folder_open): the
 * images in name order, each with the mask of its stem; then the masks
 * nobody took. */
static brg_status pair(brg_seg_folder *f, const char *idir, const char *mdir, const brg_names *ifiles,
                       const brg_names *mfiles)
{
    stem *is = NULL, *ms = NULL;
    int64_t ni = 0, nm = 0;
    /* Per listing index: its stem entry (NULL: not an image or not a .png). */
    const stem **iof = calloc((size_t)(ifiles->n ? ifiles->n : 1), sizeof *iof);
    const stem **mof = calloc((size_t)(mfiles->n ? mfiles->n : 1), sizeof *mof);
    char *used = calloc((size_t)(mfiles->n ? mfiles->n : 1), 1);
    brg_status st = iof && mof && used ? BRG_OK : brg_error(BRG_ERR_HOST_MEMORY, "segmentation folder: out of host "
                                                                                  "memory");
    if (st == BRG_OK) st = stems_of(ifiles, brg_is_image_name, &is, &ni);
    if (st == BRG_OK) st = stems_of(mfiles, is_png_name, &ms, &nm);
    for (int64_t k = 0; st == BRG_OK && k < ni; k++) iof[is[k].index] = &is[k];
    for (int64_t k = 0; st == BRG_OK && k < nm; k++) mof[ms[k].index] = &ms[k];
    char path[4200], why[8500];
    for (int64_t i = 0; st == BRG_OK && i < ifiles->n; i++) {
        const char *name = ifiles->v[i];
        const stem *e = iof[i];
        if (!e) {
            st = ignore(f, idir, name, "not a .jpg, .jpeg or .png image");
            continue;
        }
        if (e->dup) {
            snprintf(why, sizeof why, "another image in %s has the name %s: which one %s/%s.png labels is unclear",
                     idir, e->stem, mdir, e->stem);
            st = ignore(f, idir, name, why);
            continue;
        }
        /* The mask of the same stem: bisection in the sorted masks. */
        int64_t lo = 0, hi = nm;
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (strcmp(ms[mid].stem, e->stem) < 0) lo = mid + 1;
            else hi = mid;
        }
        const int found = lo < nm && strcmp(ms[lo].stem, e->stem) == 0;
        if (found && !ms[lo].dup) {
            used[ms[lo].index] = 1;
            if ((st = brg_path_join(path, sizeof path, idir, name)) == BRG_OK) st = brg_names_add(&f->images, path);
            if (st == BRG_OK && (st = brg_path_join(path, sizeof path, mdir, mfiles->v[ms[lo].index])) == BRG_OK)
                st = brg_names_add(&f->masks, path);
        } else {
            snprintf(why, sizeof why, "has no mask (%s/%s.png)%s", mdir, e->stem,
                     found ? ": two masks have its name" : "");
            st = ignore(f, idir, name, why);
        }
    }
    for (int64_t i = 0; st == BRG_OK && i < mfiles->n; i++) {
        const char *name = mfiles->v[i];
        const stem *e = mof[i];
        if (used[i]) continue;
        if (!e) {
            st = ignore(f, mdir, name,
                        brg_is_image_name(name) ? "a mask must be a PNG (JPEG's lossy coding changes labels)"
                                                : "not a .png mask");
            continue;
        }
        /* Its image, if any, was left out above: find why. */
        int64_t lo = 0, hi = ni;
        while (lo < hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (strcmp(is[mid].stem, e->stem) < 0) lo = mid + 1;
            else hi = mid;
        }
        if (e->dup) snprintf(why, sizeof why, "another mask in %s has the name %s", mdir, e->stem);
        else if (lo < ni && strcmp(is[lo].stem, e->stem) == 0)
            snprintf(why, sizeof why, "two images in %s have its name %s", idir, e->stem);
        else snprintf(why, sizeof why, "has no image in %s (%s.jpg, .jpeg or .png)", idir, e->stem);
        st = ignore(f, mdir, name, why);
    }
    stems_free(is, ni);
    stems_free(ms, nm);
    free(iof);
    free(mof);
    free(used);
    return st;
}

brg_status brg_seg_folder_open(const char *dir, brg_seg_folder **out)
{
    if (!out || !dir) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_seg_folder_open: NULL argument");
    *out = NULL;
    char idir[4200], mdir[4200];
    brg_status st = brg_path_join(idir, sizeof idir, dir, "images");
    if (st == BRG_OK) st = brg_path_join(mdir, sizeof mdir, dir, "masks");
    if (st != BRG_OK) return st;
    const int has_i = is_dir(idir), has_m = is_dir(mdir);
    if (!has_i || !has_m)
        return brg_error(BRG_ERR_FORMAT,
                         "%s is not a segmentation folder: it has no %s%s%s (images go in %s/images/NAME.jpg or .png, "
                         "their masks in %s/masks/NAME.png)", dir, has_i ? "" : "images/",
                         !has_i && !has_m ? " and no " : "", has_m ? "" : "masks/", dir, dir);
    brg_seg_folder *f = calloc(1, sizeof *f);
    if (!f || !(f->dir = strdup(dir))) {
        free(f);
        return brg_error(BRG_ERR_HOST_MEMORY, "segmentation folder: out of host memory");
    }
    brg_names ifiles = {0}, idirs = {0}, mfiles = {0}, mdirs = {0};
    st = brg_list_dir(idir, &ifiles, &idirs);
    if (st == BRG_OK) st = brg_list_dir(mdir, &mfiles, &mdirs);
    for (int64_t i = 0; st == BRG_OK && i < idirs.n; i++)
        st = ignore(f, idir, idirs.v[i], "a folder: images/ is read without its subfolders");
    if (st == BRG_OK) st = pair(f, idir, mdir, &ifiles, &mfiles);
    for (int64_t i = 0; st == BRG_OK && i < mdirs.n; i++)
        st = ignore(f, mdir, mdirs.v[i], "a folder: masks/ is read without its subfolders");
    brg_names_free(&ifiles);
    brg_names_free(&idirs);
    brg_names_free(&mfiles);
    brg_names_free(&mdirs);
    if (st != BRG_OK) {
        brg_seg_folder_destroy(f);
        return st;
    }
    *out = f;
    return BRG_OK;
}

const char *brg_seg_folder_dir(const brg_seg_folder *f) { return f ? f->dir : NULL; }
int64_t brg_seg_folder_count(const brg_seg_folder *f) { return f ? f->images.n : 0; }
int64_t brg_seg_folder_ignored_count(const brg_seg_folder *f) { return f ? f->ignored.n : 0; }

const char *brg_seg_folder_image(const brg_seg_folder *f, int64_t i)
{
    return f && i >= 0 && i < f->images.n ? f->images.v[i] : NULL;
}

const char *brg_seg_folder_mask(const brg_seg_folder *f, int64_t i)
{
    return f && i >= 0 && i < f->masks.n ? f->masks.v[i] : NULL;
}

const char *brg_seg_folder_ignored(const brg_seg_folder *f, int64_t i, const char **why)
{
    const int ok = f && i >= 0 && i < f->ignored.n;
    if (why) *why = ok ? f->why.v[i] : NULL;
    return ok ? f->ignored.v[i] : NULL;
}

/* The pairs of f where in_val[i] == want (no ignored files: they are
 * reported from the folder that was split). */
static brg_status subset(const brg_seg_folder *f, const char *in_val, char want, brg_seg_folder **out)
{
    brg_seg_folder *g = calloc(1, sizeof *g);
    brg_status st = BRG_OK;
    if (!g || !(g->dir = strdup(f->dir)))
        st = brg_error(BRG_ERR_HOST_MEMORY, "segmentation folder: out of host memory");
    for (int64_t i = 0; st == BRG_OK && i < f->images.n; i++) {
        if (in_val[i] != want) continue;
        if ((st = brg_names_add(&g->images, f->images.v[i])) == BRG_OK) st = brg_names_add(&g->masks, f->masks.v[i]);
    }
    if (st != BRG_OK) {
        brg_seg_folder_destroy(g);
        return st;
    }
    *out = g;
    return BRG_OK;
}

brg_status brg_seg_folder_split(const brg_seg_folder *f, double fraction, uint64_t seed, brg_seg_folder **train,
                                brg_seg_folder **val)
{
    if (!f || !train || !val) return brg_error(BRG_ERR_INVALID_ARGUMENT, "brg_seg_folder_split: NULL argument");
    *train = *val = NULL;
    if (!(fraction > 0.0 && fraction < 1.0))
        return brg_error(BRG_ERR_INVALID_ARGUMENT, "the validation fraction %g is not between 0 and 1", fraction);
    const int64_t n = f->images.n;
    char *in_val = calloc((size_t)(n ? n : 1), 1);
    int64_t *members = malloc((size_t)(n ? n : 1) * sizeof *members);
    if (!in_val || !members) {
        free(in_val);
        free(members);
        return brg_error(BRG_ERR_HOST_MEMORY, "segmentation folder: out of host memory");
    }
    for (int64_t i = 0; i < n; i++) members[i] = i;
    brg_split_group(members, n, fraction, seed, 0, in_val);
    brg_status st = subset(f, in_val, 0, train);
    if (st == BRG_OK && (st = subset(f, in_val, 1, val)) != BRG_OK) {
        brg_seg_folder_destroy(*train);
        *train = NULL;
    }
    free(in_val);
    free(members);
    return st;
}

/* Every value of mask below classes or equal to ignore_label; else
 * BRG_ERR_FORMAT naming the mask, the first wrong value (row by row) and
 * its pixel, and how many pixels are wrong. */
static brg_status check_labels(const brg_image *mask, const char *path, int classes, int32_t ignore_label)
{
    int64_t wrong = 0, first = -1;
    const int64_t n = (int64_t)mask->width * mask->height;
    for (int64_t i = 0; i < n; i++) {
        const int v = mask->pixels[i];
        if (v < classes || v == ignore_label) continue;
        if (first < 0) first = i;
        wrong++;
    }
    if (!wrong) return BRG_OK;
    return brg_error(BRG_ERR_FORMAT,
                     "%s: pixel (%lld, %lld) (x, y) holds %d, which is neither a class (0..%d) nor the ignore label "
                     "%d; %lld pixel%s of the mask hold such values", path, (long long)(first % mask->width),
                     (long long)(first / mask->width), mask->pixels[first], classes - 1, (int)ignore_label,
                     (long long)wrong, wrong == 1 ? "" : "s");
}

brg_status brg_seg_load(const brg_seg_folder *f, int64_t i, const brg_image_transform *t, int classes,
                        int32_t ignore_label, uint64_t seed, float *image, int32_t *labels, const char **culprit)
{
    const char *ipath = f->images.v[i], *mpath = f->masks.v[i];
    brg_image img, mask;
    *culprit = ipath;
    /* At full size (no reduced JPEG scale): the mask is checked against
     * the image's real size, and both resize from the same grid. */
    brg_status st = brg_image_read(ipath, t->channels, 0, &img);
    if (st != BRG_OK) return st;
    *culprit = mpath;
    st = brg_mask_read(mpath, &mask);
    if (st == BRG_OK && (mask.width != img.width || mask.height != img.height))
        st = brg_error(BRG_ERR_FORMAT, "%s is %dx%d, but its image %s is %dx%d; a mask needs its image's size", mpath,
                       mask.width, mask.height, ipath, img.width, img.height);
    if (st == BRG_OK) st = check_labels(&mask, mpath, classes, ignore_label);
    if (st == BRG_OK) {
        *culprit = ipath;
        st = brg_image_transform_apply_mask(&img, &mask, t, seed, image, labels);
        if (st != BRG_OK) brg_error_context(st, "%s", ipath);
    }
    brg_image_free(&img);
    brg_image_free(&mask);
    return st;
}
