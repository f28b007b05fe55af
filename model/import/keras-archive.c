/* .keras archives (Keras 3's model.save): a zip (read with libzip) holding
 * config.json, the model as model.to_json() writes it, and
 * model.weights.h5 (read with HDF5 from memory), where each layer's
 * weights are layers/<group>/vars/0, 1, ... in the order of the layer's
 * weights, the group's "name" attribute naming the layer. The importer
 * registers each layer's parameters in that same order ("<layer>/kernel",
 * then "<layer>/bias"; BatchNormalization's gamma, beta, moving_mean,
 * moving_variance, those it has), so vars/i binds the layer's i-th. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "model/import/import-impl.h"

#ifdef BRG_HAVE_KERAS_ARCHIVE
#include <hdf5.h>
#include <zip.h>

#define MAX_MEMBER_BYTES ((zip_uint64_t)4 << 30)
#define MAX_CONFIG_BYTES ((zip_uint64_t)256 << 20) /* as a Keras JSON file */

/* The archive's member name into a malloc'ed buffer. */
static brg_status read_member(zip_t *z, const char *path, const char *name, zip_uint64_t max, char **data,
                              size_t *len)
{
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat(z, name, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
        return brg_error(BRG_ERR_FORMAT, "%s: no %s in the archive: not a .keras file (Keras 3's model.save)", path,
                         name);
    if (st.size > max)
        return brg_error(BRG_ERR_FORMAT, "%s: %s is larger than %llu MiB", path, name, (unsigned long long)(max >> 20));
    char *buf = malloc((size_t)st.size + 1);
    if (!buf) return brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate %llu bytes for %s of %s",
                               (unsigned long long)st.size, name, path);
    zip_file_t *f = zip_fopen(z, name, 0);
    const zip_int64_t got = f ? zip_fread(f, buf, st.size) : -1;
    if (f) zip_fclose(f);
    if (got < 0 || (zip_uint64_t)got != st.size) {
        free(buf);
        return brg_error(BRG_ERR_FORMAT, "%s: cannot read %s from the archive: %s", path, name, zip_strerror(z));
    }
    buf[st.size] = '\0';
    *data = buf;
    *len = (size_t)st.size;
    return BRG_OK;
}

/* The layer name a vars group's "name" attribute holds, into out. */
static int vars_name(hid_t vars, char *out, size_t size)
{
    if (H5Aexists(vars, "name") <= 0) return 0;
    hid_t a = H5Aopen(vars, "name", H5P_DEFAULT);
    hid_t ft = a >= 0 ? H5Aget_type(a) : -1;
    hid_t space = a >= 0 ? H5Aget_space(a) : -1;
    const int one = space >= 0 && H5Sget_simple_extent_npoints(space) == 1; /* H5Aread writes them all */
    if (space >= 0) H5Sclose(space);
    int ok = 0;
    if (one && ft >= 0 && H5Tget_class(ft) == H5T_STRING && H5Tget_size(ft) < 4096) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        if (H5Tis_variable_str(ft) > 0) {
            char *s = NULL;
            H5Tset_size(mt, H5T_VARIABLE);
            H5Tset_cset(mt, H5Tget_cset(ft));
            if (H5Aread(a, mt, &s) >= 0 && s) {
                snprintf(out, size, "%s", s);
                ok = 1;
            }
            if (s) H5free_memory(s);
        } else {
            const size_t n = H5Tget_size(ft);
            char *s = calloc(n + 1, 1);
            H5Tset_size(mt, n + 1);
            H5Tset_strpad(mt, H5T_STR_NULLTERM);
            if (s && H5Aread(a, mt, s) >= 0) {
                snprintf(out, size, "%s", s);
                ok = 1;
            }
            free(s);
        }
        H5Tclose(mt);
    }
    if (ft >= 0) H5Tclose(ft);
    if (a >= 0) H5Aclose(a);
    return ok;
}

/* Parameter k (in registration order) of layer name, or NULL. */
static import_param *layer_param(brg_import *imp, const char *name, int k)
{
    const size_t n = strlen(name);
    for (int i = 0; i < imp->n_params; i++) {
        import_param *p = &imp->params[i];
        if (strncmp(p->source, name, n) == 0 && p->source[n] == '/' && k-- == 0) return p;
    }
    return NULL;
}

/* The shape Keras gives parameter p (its rank, the sizes into shape): a
 * vector, or the file's dims the layout was registered with. */
static int keras_shape(const import_param *p, hsize_t shape[4])
{
    const int64_t *d = p->dims;
    switch (p->layout) {
    case IMPORT_AS_IS: shape[0] = (hsize_t)p->count; return 1;
    case IMPORT_TRANSPOSE: shape[0] = (hsize_t)d[0], shape[1] = (hsize_t)d[1]; return 2;
    case IMPORT_HWIO:
        for (int i = 0; i < 4; i++) shape[i] = (hsize_t)d[i];
        return 4;
    case IMPORT_HWC_ROWS: shape[0] = (hsize_t)(d[0] * d[1] * d[2]), shape[1] = (hsize_t)d[3]; return 2;
    }
    return 0;
}

static void shape_text(const hsize_t *shape, int rank, char *buf, size_t size)
{
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < rank && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
    if (at < size) snprintf(buf + at, size - at, "]");
}

/* Bind vars/0, vars/1, ... of one layer group. */
static brg_status bind_group(brg_import *imp, hid_t layers, const char *group, const char *path)
{
    char where[512];
    snprintf(where, sizeof where, "%s/vars", group);
    if (H5Lexists(layers, where, H5P_DEFAULT) <= 0) return BRG_OK;
    hid_t vars = H5Gopen2(layers, where, H5P_DEFAULT);
    if (vars < 0) return brg_error(BRG_ERR_FORMAT, "%s: cannot open layers/%s", path, where);
    char name[BRG_NAME_MAX] = "";
    brg_status st = BRG_OK;
    if (!vars_name(vars, name, sizeof name)) st = brg_error(BRG_ERR_FORMAT, "%s: layers/%s has no name", path, where);
    for (int k = 0; st == BRG_OK; k++) {
        char ds_name[16];
        snprintf(ds_name, sizeof ds_name, "%d", k);
        if (H5Lexists(vars, ds_name, H5P_DEFAULT) <= 0) break;
        import_param *p = layer_param(imp, name, k);
        if (!p) {
            if (brg_model_find_layer(imp->model, name) >= 0 || k > 0)
                st = brg_error(BRG_ERR_FORMAT, "%s: layer '%s' has more weights than the model gives it", path, name);
            break; /* a layer the model left out */
        }
        hid_t ds = H5Dopen2(vars, ds_name, H5P_DEFAULT);
        hid_t space = ds >= 0 ? H5Dget_space(ds) : -1;
        const hssize_t count = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
        /* The shape, not only the count: a kernel [3, 3, 4, 3] where the
         * model needs [3, 3, 3, 4] has as many values, in another order. */
        hsize_t want[4], have[4];
        const int want_rank = keras_shape(p, want);
        const int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
        int same = rank == want_rank && rank <= 4 && H5Sget_simple_extent_dims(space, have, NULL) == rank;
        for (int i = 0; same && i < rank; i++) same = have[i] == want[i];
        if (count != p->count) {
            st = brg_error(BRG_ERR_FORMAT, "%s: weight %d of layer '%s' (%s) has %lld values; the model needs %lld",
                           path, k, name, p->source, (long long)count, (long long)p->count);
        } else if (!same) {
            char a[96] = "(unreadable)", b[96];
            if (rank >= 0 && rank <= 4 && H5Sget_simple_extent_dims(space, have, NULL) == rank)
                shape_text(have, rank, a, sizeof a);
            shape_text(want, want_rank, b, sizeof b);
            st = brg_error(BRG_ERR_FORMAT, "%s: weight %d of layer '%s' (%s) is %s; the model needs %s", path, k,
                           name, p->source, a, b);
        } else {
            float *v = malloc((size_t)(count ? count : 1) * sizeof *v);
            if (!v) st = brg_error(BRG_ERR_HOST_MEMORY, "cannot allocate the weights of '%s'", p->source);
            else if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
                st = brg_error(BRG_ERR_FORMAT, "%s: cannot read weight %d of layer '%s' as float32", path, k, name);
            else if ((st = brg_import_bind(imp, p->source, v, p->count)) != BRG_OK)
                st = brg_error_context(st, "%s: layer '%s'", path, name);
            free(v);
        }
        if (space >= 0) H5Sclose(space);
        if (ds >= 0) H5Dclose(ds);
    }
    H5Gclose(vars);
    return st;
}

static brg_status bind_weights(brg_import *imp, const void *h5, size_t len, const char *path)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    brg_status st = BRG_OK;
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0 || H5Pset_file_image(fapl, (void *)h5, len) < 0)
        st = brg_error(BRG_ERR_BACKEND, "%s: HDF5 cannot open a file image", path);
    hid_t f = st == BRG_OK ? H5Fopen("model.weights.h5", H5F_ACC_RDONLY, fapl) : -1;
    if (st == BRG_OK && f < 0) st = brg_error(BRG_ERR_FORMAT, "%s: model.weights.h5 is not an HDF5 file", path);
    hid_t layers = f >= 0 && H5Lexists(f, "layers", H5P_DEFAULT) > 0 ? H5Gopen2(f, "layers", H5P_DEFAULT) : -1;
    if (st == BRG_OK && layers < 0) st = brg_error(BRG_ERR_FORMAT, "%s: model.weights.h5 has no layers group", path);
    H5G_info_t info;
    if (st == BRG_OK && H5Gget_info(layers, &info) < 0) st = brg_error(BRG_ERR_FORMAT, "%s: cannot list layers", path);
    for (hsize_t i = 0; st == BRG_OK && i < info.nlinks; i++) {
        char group[256];
        if (H5Lget_name_by_idx(layers, ".", H5_INDEX_NAME, H5_ITER_INC, i, group, sizeof group, H5P_DEFAULT) < 0) {
            st = brg_error(BRG_ERR_FORMAT, "%s: cannot list layers", path);
            break;
        }
        st = bind_group(imp, layers, group, path);
    }
    if (layers >= 0) H5Gclose(layers);
    if (f >= 0) H5Fclose(f);
    if (fapl >= 0) H5Pclose(fapl);
    if (st == BRG_OK && !brg_import_has_weights(imp)) {
        for (int i = 0; i < imp->n_params; i++)
            if (!imp->params[i].values)
                return brg_error(BRG_ERR_FORMAT, "%s: model.weights.h5 holds no '%s'", path, imp->params[i].source);
    }
    return st;
}

brg_status keras_archive_import(const char *path, brg_import **out)
{
    int err = 0;
    zip_t *z = zip_open(path, ZIP_RDONLY, &err);
    if (!z) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, err);
        const brg_status st = brg_error(err == ZIP_ER_NOENT || err == ZIP_ER_OPEN ? BRG_ERR_IO : BRG_ERR_FORMAT,
                                        "cannot open Keras archive %s: %s", path, zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return st;
    }
    char *config = NULL, *weights = NULL;
    size_t config_len = 0, weights_len = 0;
    brg_status st = read_member(z, path, "config.json", MAX_CONFIG_BYTES, &config, &config_len);
    if (st == BRG_OK) st = read_member(z, path, "model.weights.h5", MAX_MEMBER_BYTES, &weights, &weights_len);
    zip_close(z);
    if (st == BRG_OK) st = brg_import_keras_json(config, config_len, path, out);
    if (st == BRG_OK) {
        /* HDF5 prints its own error stack unless told not to. */
        H5E_auto2_t old_fn;
        void *old_data;
        H5Eget_auto2(H5E_DEFAULT, &old_fn, &old_data);
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        st = bind_weights(*out, weights, weights_len, path);
        H5Eset_auto2(H5E_DEFAULT, old_fn, old_data);
        if (st != BRG_OK) {
            brg_import_free(*out);
            *out = NULL;
        }
    }
    free(config);
    free(weights);
    return st;
}
#else
brg_status keras_archive_import(const char *path, brg_import **out)
{
    *out = NULL;
    return brg_error(BRG_ERR_UNSUPPORTED, "%s: this brigade was built without .keras archives: install libzip-dev "
                                          "and libhdf5-dev, then configure and build again (or give the model's "
                                          "JSON, model.to_json())", path);
}
#endif
